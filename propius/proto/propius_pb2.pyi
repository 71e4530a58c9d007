from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATE_UNSPECIFIED: _ClassVar[JobState]
    JOB_STATE_REGISTERED: _ClassVar[JobState]
    JOB_STATE_RUNNING: _ClassVar[JobState]
    JOB_STATE_COMPLETED: _ClassVar[JobState]
    JOB_STATE_CANCELLED: _ClassVar[JobState]

class RoundState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROUND_STATE_UNSPECIFIED: _ClassVar[RoundState]
    ROUND_STATE_OPEN: _ClassVar[RoundState]
    ROUND_STATE_CLOSED: _ClassVar[RoundState]
    ROUND_STATE_FAILED: _ClassVar[RoundState]
JOB_STATE_UNSPECIFIED: JobState
JOB_STATE_REGISTERED: JobState
JOB_STATE_RUNNING: JobState
JOB_STATE_COMPLETED: JobState
JOB_STATE_CANCELLED: JobState
ROUND_STATE_UNSPECIFIED: RoundState
ROUND_STATE_OPEN: RoundState
ROUND_STATE_CLOSED: RoundState
ROUND_STATE_FAILED: RoundState

class RegisterJobRequest(_message.Message):
    __slots__ = ("spec_json",)
    SPEC_JSON_FIELD_NUMBER: _ClassVar[int]
    spec_json: str
    def __init__(self, spec_json: _Optional[str] = ...) -> None: ...

class RegisterJobResponse(_message.Message):
    __slots__ = ("job_id", "job_token")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_token: str
    def __init__(self, job_id: _Optional[str] = ..., job_token: _Optional[str] = ...) -> None: ...

class JobRef(_message.Message):
    __slots__ = ("job_id", "job_token", "export_trace")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPORT_TRACE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_token: str
    export_trace: bool
    def __init__(self, job_id: _Optional[str] = ..., job_token: _Optional[str] = ..., export_trace: bool = ...) -> None: ...

class StartRoundRequest(_message.Message):
    __slots__ = ("job_id", "job_token", "demand")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TOKEN_FIELD_NUMBER: _ClassVar[int]
    DEMAND_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_token: str
    demand: int
    def __init__(self, job_id: _Optional[str] = ..., job_token: _Optional[str] = ..., demand: _Optional[int] = ...) -> None: ...

class EndRoundRequest(_message.Message):
    __slots__ = ("job_id", "job_token", "round")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_token: str
    round: int
    def __init__(self, job_id: _Optional[str] = ..., job_token: _Optional[str] = ..., round: _Optional[int] = ...) -> None: ...

class RoundInfo(_message.Message):
    __slots__ = ("job_id", "round", "attempt", "state", "demand", "target", "bound", "results", "deadline_unix", "started_unix", "closed_unix")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DEMAND_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    BOUND_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_UNIX_FIELD_NUMBER: _ClassVar[int]
    STARTED_UNIX_FIELD_NUMBER: _ClassVar[int]
    CLOSED_UNIX_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    round: int
    attempt: int
    state: RoundState
    demand: int
    target: int
    bound: int
    results: int
    deadline_unix: float
    started_unix: float
    closed_unix: float
    def __init__(self, job_id: _Optional[str] = ..., round: _Optional[int] = ..., attempt: _Optional[int] = ..., state: _Optional[_Union[RoundState, str]] = ..., demand: _Optional[int] = ..., target: _Optional[int] = ..., bound: _Optional[int] = ..., results: _Optional[int] = ..., deadline_unix: _Optional[float] = ..., started_unix: _Optional[float] = ..., closed_unix: _Optional[float] = ...) -> None: ...

class JobInfo(_message.Message):
    __slots__ = ("job_id", "name", "owner", "state", "rounds_done", "rounds_total", "current_round", "spec_json", "created_unix", "finished_unix", "trace_dir", "placement")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_DONE_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    CURRENT_ROUND_FIELD_NUMBER: _ClassVar[int]
    SPEC_JSON_FIELD_NUMBER: _ClassVar[int]
    CREATED_UNIX_FIELD_NUMBER: _ClassVar[int]
    FINISHED_UNIX_FIELD_NUMBER: _ClassVar[int]
    TRACE_DIR_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    name: str
    owner: str
    state: JobState
    rounds_done: int
    rounds_total: int
    current_round: RoundInfo
    spec_json: str
    created_unix: float
    finished_unix: float
    trace_dir: str
    placement: JobPlacement
    def __init__(self, job_id: _Optional[str] = ..., name: _Optional[str] = ..., owner: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., rounds_done: _Optional[int] = ..., rounds_total: _Optional[int] = ..., current_round: _Optional[_Union[RoundInfo, _Mapping]] = ..., spec_json: _Optional[str] = ..., created_unix: _Optional[float] = ..., finished_unix: _Optional[float] = ..., trace_dir: _Optional[str] = ..., placement: _Optional[_Union[JobPlacement, _Mapping]] = ...) -> None: ...

class JobPlacement(_message.Message):
    __slots__ = ("job_id", "requested", "accelerators", "racks", "how", "waiting_reason", "waiting_since_unix")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_FIELD_NUMBER: _ClassVar[int]
    ACCELERATORS_FIELD_NUMBER: _ClassVar[int]
    RACKS_FIELD_NUMBER: _ClassVar[int]
    HOW_FIELD_NUMBER: _ClassVar[int]
    WAITING_REASON_FIELD_NUMBER: _ClassVar[int]
    WAITING_SINCE_UNIX_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    requested: int
    accelerators: _containers.RepeatedScalarFieldContainer[str]
    racks: _containers.RepeatedScalarFieldContainer[str]
    how: str
    waiting_reason: str
    waiting_since_unix: float
    def __init__(self, job_id: _Optional[str] = ..., requested: _Optional[int] = ..., accelerators: _Optional[_Iterable[str]] = ..., racks: _Optional[_Iterable[str]] = ..., how: _Optional[str] = ..., waiting_reason: _Optional[str] = ..., waiting_since_unix: _Optional[float] = ...) -> None: ...

class FabricRecovery(_message.Message):
    __slots__ = ("kind", "job_id", "failed", "spare", "components", "time_s", "throughput")
    class ComponentsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    KIND_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    SPARE_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    TIME_S_FIELD_NUMBER: _ClassVar[int]
    THROUGHPUT_FIELD_NUMBER: _ClassVar[int]
    kind: str
    job_id: str
    failed: str
    spare: str
    components: _containers.ScalarMap[str, float]
    time_s: float
    throughput: float
    def __init__(self, kind: _Optional[str] = ..., job_id: _Optional[str] = ..., failed: _Optional[str] = ..., spare: _Optional[str] = ..., components: _Optional[_Mapping[str, float]] = ..., time_s: _Optional[float] = ..., throughput: _Optional[float] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("include_finished",)
    INCLUDE_FINISHED_FIELD_NUMBER: _ClassVar[int]
    include_finished: bool
    def __init__(self, include_finished: bool = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[JobInfo]
    def __init__(self, jobs: _Optional[_Iterable[_Union[JobInfo, _Mapping]]] = ...) -> None: ...

class JobEvent(_message.Message):
    __slots__ = ("kind", "job", "round", "client_id", "at_unix", "recovery")
    KIND_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    AT_UNIX_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_FIELD_NUMBER: _ClassVar[int]
    kind: str
    job: JobInfo
    round: RoundInfo
    client_id: str
    at_unix: float
    recovery: FabricRecovery
    def __init__(self, kind: _Optional[str] = ..., job: _Optional[_Union[JobInfo, _Mapping]] = ..., round: _Optional[_Union[RoundInfo, _Mapping]] = ..., client_id: _Optional[str] = ..., at_unix: _Optional[float] = ..., recovery: _Optional[_Union[FabricRecovery, _Mapping]] = ...) -> None: ...

class ClientProfile(_message.Message):
    __slots__ = ("client_id", "device_class", "numeric", "labels")
    class NumericEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_CLASS_FIELD_NUMBER: _ClassVar[int]
    NUMERIC_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    device_class: str
    numeric: _containers.ScalarMap[str, float]
    labels: _containers.ScalarMap[str, str]
    def __init__(self, client_id: _Optional[str] = ..., device_class: _Optional[str] = ..., numeric: _Optional[_Mapping[str, float]] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CheckInRequest(_message.Message):
    __slots__ = ("profile", "wait_s", "max_offers")
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    WAIT_S_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFERS_FIELD_NUMBER: _ClassVar[int]
    profile: ClientProfile
    wait_s: float
    max_offers: int
    def __init__(self, profile: _Optional[_Union[ClientProfile, _Mapping]] = ..., wait_s: _Optional[float] = ..., max_offers: _Optional[int] = ...) -> None: ...

class TaskOffer(_message.Message):
    __slots__ = ("offer_id", "job_id", "job_name", "round", "attempt", "private_requirements_json", "task_json", "expires_unix")
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    PRIVATE_REQUIREMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    TASK_JSON_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_UNIX_FIELD_NUMBER: _ClassVar[int]
    offer_id: str
    job_id: str
    job_name: str
    round: int
    attempt: int
    private_requirements_json: str
    task_json: str
    expires_unix: float
    def __init__(self, offer_id: _Optional[str] = ..., job_id: _Optional[str] = ..., job_name: _Optional[str] = ..., round: _Optional[int] = ..., attempt: _Optional[int] = ..., private_requirements_json: _Optional[str] = ..., task_json: _Optional[str] = ..., expires_unix: _Optional[float] = ...) -> None: ...

class CheckInResponse(_message.Message):
    __slots__ = ("client_id", "session_token", "offers", "retry_after_s", "server_unix")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    OFFERS_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_S_FIELD_NUMBER: _ClassVar[int]
    SERVER_UNIX_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    session_token: str
    offers: _containers.RepeatedCompositeFieldContainer[TaskOffer]
    retry_after_s: float
    server_unix: float
    def __init__(self, client_id: _Optional[str] = ..., session_token: _Optional[str] = ..., offers: _Optional[_Iterable[_Union[TaskOffer, _Mapping]]] = ..., retry_after_s: _Optional[float] = ..., server_unix: _Optional[float] = ...) -> None: ...

class AcceptRequest(_message.Message):
    __slots__ = ("client_id", "session_token", "offer_id")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    session_token: str
    offer_id: str
    def __init__(self, client_id: _Optional[str] = ..., session_token: _Optional[str] = ..., offer_id: _Optional[str] = ...) -> None: ...

class AcceptResponse(_message.Message):
    __slots__ = ("bound", "reason", "job_id", "round", "attempt", "lease_s", "deadline_unix", "model_digest", "server_unix")
    BOUND_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    LEASE_S_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_UNIX_FIELD_NUMBER: _ClassVar[int]
    MODEL_DIGEST_FIELD_NUMBER: _ClassVar[int]
    SERVER_UNIX_FIELD_NUMBER: _ClassVar[int]
    bound: bool
    reason: str
    job_id: str
    round: int
    attempt: int
    lease_s: float
    deadline_unix: float
    model_digest: str
    server_unix: float
    def __init__(self, bound: bool = ..., reason: _Optional[str] = ..., job_id: _Optional[str] = ..., round: _Optional[int] = ..., attempt: _Optional[int] = ..., lease_s: _Optional[float] = ..., deadline_unix: _Optional[float] = ..., model_digest: _Optional[str] = ..., server_unix: _Optional[float] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("client_id", "session_token", "job_id", "round")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    session_token: str
    job_id: str
    round: int
    def __init__(self, client_id: _Optional[str] = ..., session_token: _Optional[str] = ..., job_id: _Optional[str] = ..., round: _Optional[int] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("valid", "lease_s", "server_unix")
    VALID_FIELD_NUMBER: _ClassVar[int]
    LEASE_S_FIELD_NUMBER: _ClassVar[int]
    SERVER_UNIX_FIELD_NUMBER: _ClassVar[int]
    valid: bool
    lease_s: float
    server_unix: float
    def __init__(self, valid: bool = ..., lease_s: _Optional[float] = ..., server_unix: _Optional[float] = ...) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ("client_id", "session_token", "job_id", "round")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    session_token: str
    job_id: str
    round: int
    def __init__(self, client_id: _Optional[str] = ..., session_token: _Optional[str] = ..., job_id: _Optional[str] = ..., round: _Optional[int] = ...) -> None: ...

class ReleaseResponse(_message.Message):
    __slots__ = ("released",)
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: bool
    def __init__(self, released: bool = ...) -> None: ...

class ClientCall(_message.Message):
    __slots__ = ("call_id", "check_in", "accept", "heartbeat", "release", "cancel", "device_token")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CHECK_IN_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    DEVICE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    check_in: CheckInRequest
    accept: AcceptRequest
    heartbeat: HeartbeatRequest
    release: ReleaseRequest
    cancel: bool
    device_token: str
    def __init__(self, call_id: _Optional[int] = ..., check_in: _Optional[_Union[CheckInRequest, _Mapping]] = ..., accept: _Optional[_Union[AcceptRequest, _Mapping]] = ..., heartbeat: _Optional[_Union[HeartbeatRequest, _Mapping]] = ..., release: _Optional[_Union[ReleaseRequest, _Mapping]] = ..., cancel: bool = ..., device_token: _Optional[str] = ...) -> None: ...

class ClientCalls(_message.Message):
    __slots__ = ("calls",)
    CALLS_FIELD_NUMBER: _ClassVar[int]
    calls: _containers.RepeatedCompositeFieldContainer[ClientCall]
    def __init__(self, calls: _Optional[_Iterable[_Union[ClientCall, _Mapping]]] = ...) -> None: ...

class ClientReply(_message.Message):
    __slots__ = ("call_id", "check_in", "accept", "heartbeat", "release", "status_code", "status_details")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CHECK_IN_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    STATUS_DETAILS_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    check_in: CheckInResponse
    accept: AcceptResponse
    heartbeat: HeartbeatResponse
    release: ReleaseResponse
    status_code: int
    status_details: str
    def __init__(self, call_id: _Optional[int] = ..., check_in: _Optional[_Union[CheckInResponse, _Mapping]] = ..., accept: _Optional[_Union[AcceptResponse, _Mapping]] = ..., heartbeat: _Optional[_Union[HeartbeatResponse, _Mapping]] = ..., release: _Optional[_Union[ReleaseResponse, _Mapping]] = ..., status_code: _Optional[int] = ..., status_details: _Optional[str] = ...) -> None: ...

class ClientReplies(_message.Message):
    __slots__ = ("replies",)
    REPLIES_FIELD_NUMBER: _ClassVar[int]
    replies: _containers.RepeatedCompositeFieldContainer[ClientReply]
    def __init__(self, replies: _Optional[_Iterable[_Union[ClientReply, _Mapping]]] = ...) -> None: ...

class EnrollRequest(_message.Message):
    __slots__ = ("enrolment_token", "client_id")
    ENROLMENT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    enrolment_token: str
    client_id: str
    def __init__(self, enrolment_token: _Optional[str] = ..., client_id: _Optional[str] = ...) -> None: ...

class EnrollResponse(_message.Message):
    __slots__ = ("client_id", "device_token")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    device_token: str
    def __init__(self, client_id: _Optional[str] = ..., device_token: _Optional[str] = ...) -> None: ...

class ListClientsRequest(_message.Message):
    __slots__ = ("active_within_s",)
    ACTIVE_WITHIN_S_FIELD_NUMBER: _ClassVar[int]
    active_within_s: float
    def __init__(self, active_within_s: _Optional[float] = ...) -> None: ...

class ClientInfo(_message.Message):
    __slots__ = ("profile", "last_seen_unix", "bound_job_id", "tasks_done")
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_UNIX_FIELD_NUMBER: _ClassVar[int]
    BOUND_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TASKS_DONE_FIELD_NUMBER: _ClassVar[int]
    profile: ClientProfile
    last_seen_unix: float
    bound_job_id: str
    tasks_done: int
    def __init__(self, profile: _Optional[_Union[ClientProfile, _Mapping]] = ..., last_seen_unix: _Optional[float] = ..., bound_job_id: _Optional[str] = ..., tasks_done: _Optional[int] = ...) -> None: ...

class ListClientsResponse(_message.Message):
    __slots__ = ("clients", "supply_by_job")
    class SupplyByJobEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    CLIENTS_FIELD_NUMBER: _ClassVar[int]
    SUPPLY_BY_JOB_FIELD_NUMBER: _ClassVar[int]
    clients: _containers.RepeatedCompositeFieldContainer[ClientInfo]
    supply_by_job: _containers.ScalarMap[str, int]
    def __init__(self, clients: _Optional[_Iterable[_Union[ClientInfo, _Mapping]]] = ..., supply_by_job: _Optional[_Mapping[str, int]] = ...) -> None: ...

class PublishModelRequest(_message.Message):
    __slots__ = ("job_id", "job_token", "round", "data")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_token: str
    round: int
    data: bytes
    def __init__(self, job_id: _Optional[str] = ..., job_token: _Optional[str] = ..., round: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class PublishModelResponse(_message.Message):
    __slots__ = ("digest", "size")
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    digest: str
    size: int
    def __init__(self, digest: _Optional[str] = ..., size: _Optional[int] = ...) -> None: ...

class FetchModelRequest(_message.Message):
    __slots__ = ("client_id", "session_token", "job_id", "round")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    session_token: str
    job_id: str
    round: int
    def __init__(self, client_id: _Optional[str] = ..., session_token: _Optional[str] = ..., job_id: _Optional[str] = ..., round: _Optional[int] = ...) -> None: ...

class BlobChunk(_message.Message):
    __slots__ = ("data", "total_size", "digest")
    DATA_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    total_size: int
    digest: str
    def __init__(self, data: _Optional[bytes] = ..., total_size: _Optional[int] = ..., digest: _Optional[str] = ...) -> None: ...

class UploadUpdateRequest(_message.Message):
    __slots__ = ("client_id", "session_token", "job_id", "round", "attempt", "num_samples", "metrics_json", "timings_json", "data")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    NUM_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    METRICS_JSON_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_JSON_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    session_token: str
    job_id: str
    round: int
    attempt: int
    num_samples: float
    metrics_json: str
    timings_json: str
    data: bytes
    def __init__(self, client_id: _Optional[str] = ..., session_token: _Optional[str] = ..., job_id: _Optional[str] = ..., round: _Optional[int] = ..., attempt: _Optional[int] = ..., num_samples: _Optional[float] = ..., metrics_json: _Optional[str] = ..., timings_json: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class UploadUpdateResponse(_message.Message):
    __slots__ = ("accepted", "duplicate", "results")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    duplicate: bool
    results: int
    def __init__(self, accepted: bool = ..., duplicate: bool = ..., results: _Optional[int] = ...) -> None: ...

class AwaitAggregateRequest(_message.Message):
    __slots__ = ("job_id", "job_token", "round", "timeout_s")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_token: str
    round: int
    timeout_s: float
    def __init__(self, job_id: _Optional[str] = ..., job_token: _Optional[str] = ..., round: _Optional[int] = ..., timeout_s: _Optional[float] = ...) -> None: ...

class AggregateChunk(_message.Message):
    __slots__ = ("round", "metrics_json", "total_size", "data")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    METRICS_JSON_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    round: RoundInfo
    metrics_json: str
    total_size: int
    data: bytes
    def __init__(self, round: _Optional[_Union[RoundInfo, _Mapping]] = ..., metrics_json: _Optional[str] = ..., total_size: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class LoadFabricRequest(_message.Message):
    __slots__ = ("fabric_json",)
    FABRIC_JSON_FIELD_NUMBER: _ClassVar[int]
    fabric_json: str
    def __init__(self, fabric_json: _Optional[str] = ...) -> None: ...

class FabricChange(_message.Message):
    __slots__ = ("version", "placed_jobs", "recovery")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PLACED_JOBS_FIELD_NUMBER: _ClassVar[int]
    RECOVERY_FIELD_NUMBER: _ClassVar[int]
    version: int
    placed_jobs: _containers.RepeatedScalarFieldContainer[str]
    recovery: FabricRecovery
    def __init__(self, version: _Optional[int] = ..., placed_jobs: _Optional[_Iterable[str]] = ..., recovery: _Optional[_Union[FabricRecovery, _Mapping]] = ...) -> None: ...

class GetFabricRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FabricInfo(_message.Message):
    __slots__ = ("version", "fabric_json", "state_json", "waiting", "placement")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    FABRIC_JSON_FIELD_NUMBER: _ClassVar[int]
    STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    version: int
    fabric_json: str
    state_json: str
    waiting: _containers.RepeatedCompositeFieldContainer[JobPlacement]
    placement: str
    def __init__(self, version: _Optional[int] = ..., fabric_json: _Optional[str] = ..., state_json: _Optional[str] = ..., waiting: _Optional[_Iterable[_Union[JobPlacement, _Mapping]]] = ..., placement: _Optional[str] = ...) -> None: ...

class AcceleratorRequest(_message.Message):
    __slots__ = ("accelerator", "spare")
    ACCELERATOR_FIELD_NUMBER: _ClassVar[int]
    SPARE_FIELD_NUMBER: _ClassVar[int]
    accelerator: str
    spare: bool
    def __init__(self, accelerator: _Optional[str] = ..., spare: bool = ...) -> None: ...
