"""``run.sh``: the command that reproduces a data point's job, as CCL-Bench asks of every data point.

By default the job's own spec is embedded (heredoc) and submitted with ``--wait``, which drives the same
FedAvg rounds; it needs a control plane and clients, which the script says rather than starts.
"""

from __future__ import annotations

import json

import yaml

from propius.specs import JobSpec

__all__ = ["run_script"]

_DELIMITER = "PROPIUS_JOB_SPEC"


def run_script(spec: JobSpec, job_id: str, launch_command: str | None = None) -> str:
    """The script text; a given ``launch_command`` is used verbatim (after a shebang, unless it has one)."""
    if launch_command is not None:
        body = launch_command if launch_command.endswith("\n") else launch_command + "\n"
        return body if body.startswith("#!") else "#!/usr/bin/env bash\n" + body
    spec_yaml = yaml.safe_dump(json.loads(spec.to_json()), sort_keys=False)
    return (
        "#!/usr/bin/env bash\n"
        f"# Reproduces Propius job {spec.name} ({job_id}).\n"
        "# Needs a control plane (`propius up`) and clients (`propius-client --server HOST:PORT --devices N`);\n"
        "# PROPIUS_SERVER names the control plane (default 127.0.0.1:50051).\n"
        "set -euo pipefail\n"
        'spec="$(mktemp "${TMPDIR:-/tmp}/propius-spec.XXXXXX")"\n'
        "trap 'rm -f \"$spec\"' EXIT\n"
        f"cat > \"$spec\" <<'{_DELIMITER}'\n"
        f"{spec_yaml}"
        f"{_DELIMITER}\n"
        'propius submit "$spec" --server "${PROPIUS_SERVER:-127.0.0.1:50051}" --wait\n'
    )
