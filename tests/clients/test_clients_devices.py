from pathlib import Path

from typer.testing import CliRunner

from clients.daemon import app
from clients.identity import OFFSET_RANGE, default_device_offset, derive_seed, detected_device, simulated_devices
from propius.devices import DeviceRow, load_dataset_sizes, load_devices
from propius.specs import Constraints, DeviceClass


def test_packaged_devices_have_requirement_attribute_names() -> None:
    rows = load_devices()
    assert len(rows) == 64
    profile = rows[0].profile("abc")
    assert profile.client_id == "abc"
    assert profile.device_class is DeviceClass.EDGE
    assert set(profile.numeric) == {"cpu_f", "ram", "fp16_mem", "android_os"}
    assert profile.numeric["ram"] == rows[0].ram


def test_thresholds_split_the_packaged_devices() -> None:
    strong = Constraints.model_validate({"cpu_f": {"min": 7}, "ram": {"min": 6}})
    admitted = [strong.admits(row.profile("x").attributes()) for row in load_devices()]
    assert sum(admitted) == 24
    assert admitted[:8] == [True, True, True, True, False, False, True, False]


def test_dataset_sizes_are_the_packaged_rows_in_order() -> None:
    sizes = load_dataset_sizes()
    assert len(sizes) == 64
    assert sizes[:4] == [183, 130, 409, 87]
    assert (min(sizes), max(sizes), sum(sizes)) == (87, 584, 14840)


def test_load_devices_from_a_given_file(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("idx,device,cpu_f,ram_gb,fp16_mem,android_os,ms_per_sample\n0,Phone,1.5,4,900,12,80\n")
    assert load_devices(path) == [DeviceRow("Phone", 1.5, 4.0, 900.0, 12.0, 80.0)]


def test_simulated_devices_wrap_and_keep_their_ids(tmp_path: Path) -> None:
    first = simulated_devices(3, 63, seed=1, state_dir=tmp_path)
    again = simulated_devices(3, 63, seed=1, state_dir=tmp_path)
    assert [d.client_id for d in first] == [d.client_id for d in again]
    assert len({d.client_id for d in first}) == 3
    assert first[1].profile.numeric == load_devices()[0].profile("").numeric  # index 64 wraps to row 0
    assert first[1].private == {"dataset_size": float(load_dataset_sizes()[0])}
    assert "dataset_size" not in first[1].profile.attributes()
    assert first[0].seed == derive_seed(1, 63) != first[1].seed


def test_detected_device_keeps_dataset_size_private(tmp_path: Path) -> None:
    device = detected_device(seed=0, state_dir=tmp_path, overrides={"gpu": "yes", "ram": 3.0}, dataset_size=90)
    assert device.private == {"dataset_size": 90.0}
    assert device.profile.labels["gpu"] == "yes" and device.profile.numeric["ram"] == 3.0
    assert detected_device(seed=0, state_dir=tmp_path).client_id == device.client_id


def test_daemons_started_with_defaults_simulate_different_devices(tmp_path: Path) -> None:
    first, second = tmp_path / "daemon-1", tmp_path / "daemon-2"
    offsets = [default_device_offset(first), default_device_offset(second)]
    assert default_device_offset(first) == offsets[0]  # kept: a restart comes back as the same devices
    assert (first / "device-offset").read_text() == f"{offsets[0]}\n"
    assert all(0 <= offset < OFFSET_RANGE for offset in offsets)
    fleets = [simulated_devices(8, offset, 0, state_dir) for offset, state_dir in zip(offsets, (first, second),
                                                                                     strict=True)]
    assert not {d.index for d in fleets[0]} & {d.index for d in fleets[1]}
    assert not {d.seed for d in fleets[0]} & {d.seed for d in fleets[1]}  # so their data and jitter differ
    assert simulated_devices(8, default_device_offset(first), 0, first) == fleets[0]


def test_the_daemon_documents_device_offset() -> None:
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "--device-offset" in text and "two daemons never simulate the same phones" in text
