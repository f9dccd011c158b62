from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HealthReply(_message.Message):
    __slots__ = ("party", "role", "version", "status")
    PARTY_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    party: str
    role: str
    version: str
    status: str
    def __init__(self, party: _Optional[str] = ..., role: _Optional[str] = ..., version: _Optional[str] = ..., status: _Optional[str] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ("ok", "message")
    OK_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    message: str
    def __init__(self, ok: _Optional[bool] = ..., message: _Optional[str] = ...) -> None: ...

class PublicKey(_message.Message):
    __slots__ = ("n", "bits", "key_id")
    N_FIELD_NUMBER: _ClassVar[int]
    BITS_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    n: bytes
    bits: int
    key_id: str
    def __init__(self, n: _Optional[bytes] = ..., bits: _Optional[int] = ..., key_id: _Optional[str] = ...) -> None: ...

class Encoding(_message.Message):
    __slots__ = ("scale_bits", "value_bound", "max_rows_per_owner", "max_owners", "slot_bits", "slots_per_ciphertext", "slot_offset", "mask_bits", "statistical_security", "rotation_dimension", "count_scale_bits", "noise_bound")
    SCALE_BITS_FIELD_NUMBER: _ClassVar[int]
    VALUE_BOUND_FIELD_NUMBER: _ClassVar[int]
    MAX_ROWS_PER_OWNER_FIELD_NUMBER: _ClassVar[int]
    MAX_OWNERS_FIELD_NUMBER: _ClassVar[int]
    SLOT_BITS_FIELD_NUMBER: _ClassVar[int]
    SLOTS_PER_CIPHERTEXT_FIELD_NUMBER: _ClassVar[int]
    SLOT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MASK_BITS_FIELD_NUMBER: _ClassVar[int]
    STATISTICAL_SECURITY_FIELD_NUMBER: _ClassVar[int]
    ROTATION_DIMENSION_FIELD_NUMBER: _ClassVar[int]
    COUNT_SCALE_BITS_FIELD_NUMBER: _ClassVar[int]
    NOISE_BOUND_FIELD_NUMBER: _ClassVar[int]
    scale_bits: int
    value_bound: float
    max_rows_per_owner: int
    max_owners: int
    slot_bits: int
    slots_per_ciphertext: int
    slot_offset: bytes
    mask_bits: int
    statistical_security: int
    rotation_dimension: int
    count_scale_bits: int
    noise_bound: bytes
    def __init__(self, scale_bits: _Optional[int] = ..., value_bound: _Optional[float] = ..., max_rows_per_owner: _Optional[int] = ..., max_owners: _Optional[int] = ..., slot_bits: _Optional[int] = ..., slots_per_ciphertext: _Optional[int] = ..., slot_offset: _Optional[bytes] = ..., mask_bits: _Optional[int] = ..., statistical_security: _Optional[int] = ..., rotation_dimension: _Optional[int] = ..., count_scale_bits: _Optional[int] = ..., noise_bound: _Optional[bytes] = ...) -> None: ...

class DpSpec(_message.Message):
    __slots__ = ("epsilon", "delta", "row_norm_bound", "mu", "quorum", "mechanism")
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    ROW_NORM_BOUND_FIELD_NUMBER: _ClassVar[int]
    MU_FIELD_NUMBER: _ClassVar[int]
    QUORUM_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    epsilon: float
    delta: float
    row_norm_bound: float
    mu: float
    quorum: int
    mechanism: str
    def __init__(self, epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., row_norm_bound: _Optional[float] = ..., mu: _Optional[float] = ..., quorum: _Optional[int] = ..., mechanism: _Optional[str] = ...) -> None: ...

class Grouping(_message.Message):
    __slots__ = ("label_column", "classes")
    LABEL_COLUMN_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    label_column: str
    classes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, label_column: _Optional[str] = ..., classes: _Optional[_Iterable[str]] = ...) -> None: ...

class MomentsRequest(_message.Message):
    __slots__ = ("method", "features", "components", "standardize", "groupings", "rho", "rho_prime", "projection_only")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    STANDARDIZE_FIELD_NUMBER: _ClassVar[int]
    GROUPINGS_FIELD_NUMBER: _ClassVar[int]
    RHO_FIELD_NUMBER: _ClassVar[int]
    RHO_PRIME_FIELD_NUMBER: _ClassVar[int]
    PROJECTION_ONLY_FIELD_NUMBER: _ClassVar[int]
    method: str
    features: _containers.RepeatedScalarFieldContainer[str]
    components: int
    standardize: bool
    groupings: _containers.RepeatedCompositeFieldContainer[Grouping]
    rho: float
    rho_prime: float
    projection_only: bool
    def __init__(self, method: _Optional[str] = ..., features: _Optional[_Iterable[str]] = ..., components: _Optional[int] = ..., standardize: _Optional[bool] = ..., groupings: _Optional[_Iterable[_Union[Grouping, _Mapping]]] = ..., rho: _Optional[float] = ..., rho_prime: _Optional[float] = ..., projection_only: _Optional[bool] = ...) -> None: ...

class MomentsSpec(_message.Message):
    __slots__ = ("method", "features", "groupings", "rotation")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    GROUPINGS_FIELD_NUMBER: _ClassVar[int]
    ROTATION_FIELD_NUMBER: _ClassVar[int]
    method: str
    features: _containers.RepeatedScalarFieldContainer[str]
    groupings: _containers.RepeatedCompositeFieldContainer[Grouping]
    rotation: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, method: _Optional[str] = ..., features: _Optional[_Iterable[str]] = ..., groupings: _Optional[_Iterable[_Union[Grouping, _Mapping]]] = ..., rotation: _Optional[_Iterable[float]] = ...) -> None: ...

class KmeansRequest(_message.Message):
    __slots__ = ("k", "centers", "iterations", "tolerance", "features")
    K_FIELD_NUMBER: _ClassVar[int]
    CENTERS_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    TOLERANCE_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    k: int
    centers: _containers.RepeatedScalarFieldContainer[float]
    iterations: int
    tolerance: float
    features: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, k: _Optional[int] = ..., centers: _Optional[_Iterable[float]] = ..., iterations: _Optional[int] = ..., tolerance: _Optional[float] = ..., features: _Optional[_Iterable[str]] = ...) -> None: ...

class KmeansIteration(_message.Message):
    __slots__ = ("job_id", "iteration", "iterations", "k", "centers", "features")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    CENTERS_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    iteration: int
    iterations: int
    k: int
    centers: _containers.RepeatedScalarFieldContainer[float]
    features: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, job_id: _Optional[str] = ..., iteration: _Optional[int] = ..., iterations: _Optional[int] = ..., k: _Optional[int] = ..., centers: _Optional[_Iterable[float]] = ..., features: _Optional[_Iterable[str]] = ...) -> None: ...

class LdpRequest(_message.Message):
    __slots__ = ("column", "mechanism", "epsilon", "domain", "lower", "upper", "consistency", "columns", "box_lower", "box_upper")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    LOWER_FIELD_NUMBER: _ClassVar[int]
    UPPER_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    BOX_LOWER_FIELD_NUMBER: _ClassVar[int]
    BOX_UPPER_FIELD_NUMBER: _ClassVar[int]
    column: str
    mechanism: str
    epsilon: float
    domain: _containers.RepeatedScalarFieldContainer[str]
    lower: float
    upper: float
    consistency: bool
    columns: _containers.RepeatedScalarFieldContainer[str]
    box_lower: _containers.RepeatedScalarFieldContainer[float]
    box_upper: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, column: _Optional[str] = ..., mechanism: _Optional[str] = ..., epsilon: _Optional[float] = ..., domain: _Optional[_Iterable[str]] = ..., lower: _Optional[float] = ..., upper: _Optional[float] = ..., consistency: _Optional[bool] = ..., columns: _Optional[_Iterable[str]] = ..., box_lower: _Optional[_Iterable[float]] = ..., box_upper: _Optional[_Iterable[float]] = ...) -> None: ...

class LdpSpec(_message.Message):
    __slots__ = ("column", "mechanism", "epsilon", "domain", "lower", "upper", "theta", "olh_g", "columns", "box_lower", "box_upper")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    LOWER_FIELD_NUMBER: _ClassVar[int]
    UPPER_FIELD_NUMBER: _ClassVar[int]
    THETA_FIELD_NUMBER: _ClassVar[int]
    OLH_G_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    BOX_LOWER_FIELD_NUMBER: _ClassVar[int]
    BOX_UPPER_FIELD_NUMBER: _ClassVar[int]
    column: str
    mechanism: str
    epsilon: float
    domain: _containers.RepeatedScalarFieldContainer[str]
    lower: float
    upper: float
    theta: float
    olh_g: int
    columns: _containers.RepeatedScalarFieldContainer[str]
    box_lower: _containers.RepeatedScalarFieldContainer[float]
    box_upper: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, column: _Optional[str] = ..., mechanism: _Optional[str] = ..., epsilon: _Optional[float] = ..., domain: _Optional[_Iterable[str]] = ..., lower: _Optional[float] = ..., upper: _Optional[float] = ..., theta: _Optional[float] = ..., olh_g: _Optional[int] = ..., columns: _Optional[_Iterable[str]] = ..., box_lower: _Optional[_Iterable[float]] = ..., box_upper: _Optional[_Iterable[float]] = ...) -> None: ...

class WeightedStatsRequest(_message.Message):
    __slots__ = ("features", "weight_column", "weight_bound")
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_COLUMN_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_BOUND_FIELD_NUMBER: _ClassVar[int]
    features: _containers.RepeatedScalarFieldContainer[str]
    weight_column: str
    weight_bound: float
    def __init__(self, features: _Optional[_Iterable[str]] = ..., weight_column: _Optional[str] = ..., weight_bound: _Optional[float] = ...) -> None: ...

class WeightedStatsSpec(_message.Message):
    __slots__ = ("features", "weight_column", "weight_bound")
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_COLUMN_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_BOUND_FIELD_NUMBER: _ClassVar[int]
    features: _containers.RepeatedScalarFieldContainer[str]
    weight_column: str
    weight_bound: float
    def __init__(self, features: _Optional[_Iterable[str]] = ..., weight_column: _Optional[str] = ..., weight_bound: _Optional[float] = ...) -> None: ...

class RoundRequest(_message.Message):
    __slots__ = ("min_owners", "deadline_seconds", "scale_bits", "value_bound", "owners", "dp_epsilon", "dp_delta", "row_norm_bound", "moments", "kmeans", "ldp", "weighted_stats")
    MIN_OWNERS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SCALE_BITS_FIELD_NUMBER: _ClassVar[int]
    VALUE_BOUND_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    DP_EPSILON_FIELD_NUMBER: _ClassVar[int]
    DP_DELTA_FIELD_NUMBER: _ClassVar[int]
    ROW_NORM_BOUND_FIELD_NUMBER: _ClassVar[int]
    MOMENTS_FIELD_NUMBER: _ClassVar[int]
    KMEANS_FIELD_NUMBER: _ClassVar[int]
    LDP_FIELD_NUMBER: _ClassVar[int]
    WEIGHTED_STATS_FIELD_NUMBER: _ClassVar[int]
    min_owners: int
    deadline_seconds: float
    scale_bits: int
    value_bound: float
    owners: _containers.RepeatedScalarFieldContainer[str]
    dp_epsilon: float
    dp_delta: float
    row_norm_bound: float
    moments: MomentsRequest
    kmeans: KmeansRequest
    ldp: LdpRequest
    weighted_stats: WeightedStatsRequest
    def __init__(self, min_owners: _Optional[int] = ..., deadline_seconds: _Optional[float] = ..., scale_bits: _Optional[int] = ..., value_bound: _Optional[float] = ..., owners: _Optional[_Iterable[str]] = ..., dp_epsilon: _Optional[float] = ..., dp_delta: _Optional[float] = ..., row_norm_bound: _Optional[float] = ..., moments: _Optional[_Union[MomentsRequest, _Mapping]] = ..., kmeans: _Optional[_Union[KmeansRequest, _Mapping]] = ..., ldp: _Optional[_Union[LdpRequest, _Mapping]] = ..., weighted_stats: _Optional[_Union[WeightedStatsRequest, _Mapping]] = ...) -> None: ...

class RoundSpec(_message.Message):
    __slots__ = ("round_id", "protocol", "encoding", "key_id", "deadline_unix", "n_values", "n_ciphertexts", "dp", "moments", "kmeans", "ldp", "weighted_stats")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_UNIX_FIELD_NUMBER: _ClassVar[int]
    N_VALUES_FIELD_NUMBER: _ClassVar[int]
    N_CIPHERTEXTS_FIELD_NUMBER: _ClassVar[int]
    DP_FIELD_NUMBER: _ClassVar[int]
    MOMENTS_FIELD_NUMBER: _ClassVar[int]
    KMEANS_FIELD_NUMBER: _ClassVar[int]
    LDP_FIELD_NUMBER: _ClassVar[int]
    WEIGHTED_STATS_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    protocol: str
    encoding: Encoding
    key_id: str
    deadline_unix: float
    n_values: int
    n_ciphertexts: int
    dp: DpSpec
    moments: MomentsSpec
    kmeans: KmeansIteration
    ldp: LdpSpec
    weighted_stats: WeightedStatsSpec
    def __init__(self, round_id: _Optional[str] = ..., protocol: _Optional[str] = ..., encoding: _Optional[_Union[Encoding, _Mapping]] = ..., key_id: _Optional[str] = ..., deadline_unix: _Optional[float] = ..., n_values: _Optional[int] = ..., n_ciphertexts: _Optional[int] = ..., dp: _Optional[_Union[DpSpec, _Mapping]] = ..., moments: _Optional[_Union[MomentsSpec, _Mapping]] = ..., kmeans: _Optional[_Union[KmeansIteration, _Mapping]] = ..., ldp: _Optional[_Union[LdpSpec, _Mapping]] = ..., weighted_stats: _Optional[_Union[WeightedStatsSpec, _Mapping]] = ...) -> None: ...

class ReportBatch(_message.Message):
    __slots__ = ("data", "dtype", "shape")
    DATA_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, data: _Optional[bytes] = ..., dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ...) -> None: ...

class ReportHeader(_message.Message):
    __slots__ = ("round_id", "site_id", "n_reports", "timings")
    class TimingsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    SITE_ID_FIELD_NUMBER: _ClassVar[int]
    N_REPORTS_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    site_id: str
    n_reports: int
    timings: _containers.ScalarMap[str, float]
    def __init__(self, round_id: _Optional[str] = ..., site_id: _Optional[str] = ..., n_reports: _Optional[int] = ..., timings: _Optional[_Mapping[str, float]] = ...) -> None: ...

class ReportChunk(_message.Message):
    __slots__ = ("header", "batch")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    header: ReportHeader
    batch: ReportBatch
    def __init__(self, header: _Optional[_Union[ReportHeader, _Mapping]] = ..., batch: _Optional[_Union[ReportBatch, _Mapping]] = ...) -> None: ...

class InviteReply(_message.Message):
    __slots__ = ("accepted", "reason")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    reason: str
    def __init__(self, accepted: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class ShareHeader(_message.Message):
    __slots__ = ("round_id", "site_id", "key_id", "dimension", "encoding", "n_ciphertexts", "timings")
    class TimingsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    SITE_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    N_CIPHERTEXTS_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    site_id: str
    key_id: str
    dimension: int
    encoding: Encoding
    n_ciphertexts: int
    timings: _containers.ScalarMap[str, float]
    def __init__(self, round_id: _Optional[str] = ..., site_id: _Optional[str] = ..., key_id: _Optional[str] = ..., dimension: _Optional[int] = ..., encoding: _Optional[_Union[Encoding, _Mapping]] = ..., n_ciphertexts: _Optional[int] = ..., timings: _Optional[_Mapping[str, float]] = ...) -> None: ...

class CiphertextBatch(_message.Message):
    __slots__ = ("ciphertexts",)
    CIPHERTEXTS_FIELD_NUMBER: _ClassVar[int]
    ciphertexts: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, ciphertexts: _Optional[_Iterable[bytes]] = ...) -> None: ...

class ShareChunk(_message.Message):
    __slots__ = ("header", "batch")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    header: ShareHeader
    batch: CiphertextBatch
    def __init__(self, header: _Optional[_Union[ShareHeader, _Mapping]] = ..., batch: _Optional[_Union[CiphertextBatch, _Mapping]] = ...) -> None: ...

class DeclineNotice(_message.Message):
    __slots__ = ("round_id", "site_id", "reason")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    SITE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    site_id: str
    reason: str
    def __init__(self, round_id: _Optional[str] = ..., site_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class OwnerRegistration(_message.Message):
    __slots__ = ("site_id", "address")
    SITE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    site_id: str
    address: str
    def __init__(self, site_id: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class OwnerList(_message.Message):
    __slots__ = ("owners",)
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    owners: _containers.RepeatedCompositeFieldContainer[OwnerRegistration]
    def __init__(self, owners: _Optional[_Iterable[_Union[OwnerRegistration, _Mapping]]] = ...) -> None: ...

class ListOwnersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RoundQuery(_message.Message):
    __slots__ = ("round_id", "wait_seconds")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    wait_seconds: float
    def __init__(self, round_id: _Optional[str] = ..., wait_seconds: _Optional[float] = ...) -> None: ...

class RoundStatus(_message.Message):
    __slots__ = ("round_id", "protocol", "state", "message", "invited", "submitted", "missing", "result_json")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    INVITED_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    protocol: str
    state: str
    message: str
    invited: _containers.RepeatedScalarFieldContainer[str]
    submitted: _containers.RepeatedScalarFieldContainer[str]
    missing: _containers.RepeatedScalarFieldContainer[str]
    result_json: str
    def __init__(self, round_id: _Optional[str] = ..., protocol: _Optional[str] = ..., state: _Optional[str] = ..., message: _Optional[str] = ..., invited: _Optional[_Iterable[str]] = ..., submitted: _Optional[_Iterable[str]] = ..., missing: _Optional[_Iterable[str]] = ..., result_json: _Optional[str] = ...) -> None: ...

class CspRoundRequest(_message.Message):
    __slots__ = ("round_id", "key_id", "n_ciphertexts", "mode")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    N_CIPHERTEXTS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    key_id: str
    n_ciphertexts: int
    mode: str
    def __init__(self, round_id: _Optional[str] = ..., key_id: _Optional[str] = ..., n_ciphertexts: _Optional[int] = ..., mode: _Optional[str] = ...) -> None: ...

class DecryptChunk(_message.Message):
    __slots__ = ("header", "batch")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    header: CspRoundRequest
    batch: CiphertextBatch
    def __init__(self, header: _Optional[_Union[CspRoundRequest, _Mapping]] = ..., batch: _Optional[_Union[CiphertextBatch, _Mapping]] = ...) -> None: ...

class PlaintextBatch(_message.Message):
    __slots__ = ("plaintexts", "decrypt_seconds")
    PLAINTEXTS_FIELD_NUMBER: _ClassVar[int]
    DECRYPT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    plaintexts: _containers.RepeatedScalarFieldContainer[bytes]
    decrypt_seconds: float
    def __init__(self, plaintexts: _Optional[_Iterable[bytes]] = ..., decrypt_seconds: _Optional[float] = ...) -> None: ...

class PublicKeyRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ProjectionRequest(_message.Message):
    __slots__ = ("round_id", "key_id", "method", "dimension", "classes_per_grouping", "encoding", "n_owners", "components", "rho", "rho_prime", "ridge_noise_floor")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    CLASSES_PER_GROUPING_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    N_OWNERS_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    RHO_FIELD_NUMBER: _ClassVar[int]
    RHO_PRIME_FIELD_NUMBER: _ClassVar[int]
    RIDGE_NOISE_FLOOR_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    key_id: str
    method: str
    dimension: int
    classes_per_grouping: _containers.RepeatedScalarFieldContainer[int]
    encoding: Encoding
    n_owners: int
    components: int
    rho: float
    rho_prime: float
    ridge_noise_floor: float
    def __init__(self, round_id: _Optional[str] = ..., key_id: _Optional[str] = ..., method: _Optional[str] = ..., dimension: _Optional[int] = ..., classes_per_grouping: _Optional[_Iterable[int]] = ..., encoding: _Optional[_Union[Encoding, _Mapping]] = ..., n_owners: _Optional[int] = ..., components: _Optional[int] = ..., rho: _Optional[float] = ..., rho_prime: _Optional[float] = ..., ridge_noise_floor: _Optional[float] = ...) -> None: ...

class ProjectionChunk(_message.Message):
    __slots__ = ("header", "batch")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    header: ProjectionRequest
    batch: CiphertextBatch
    def __init__(self, header: _Optional[_Union[ProjectionRequest, _Mapping]] = ..., batch: _Optional[_Union[CiphertextBatch, _Mapping]] = ...) -> None: ...

class ProjectionResult(_message.Message):
    __slots__ = ("eigenvalues", "components", "explained_variance_ratio", "ridge", "compute_seconds")
    class RidgeEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    EIGENVALUES_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    EXPLAINED_VARIANCE_RATIO_FIELD_NUMBER: _ClassVar[int]
    RIDGE_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    eigenvalues: _containers.RepeatedScalarFieldContainer[float]
    components: _containers.RepeatedScalarFieldContainer[float]
    explained_variance_ratio: _containers.RepeatedScalarFieldContainer[float]
    ridge: _containers.ScalarMap[str, float]
    compute_seconds: float
    def __init__(self, eigenvalues: _Optional[_Iterable[float]] = ..., components: _Optional[_Iterable[float]] = ..., explained_variance_ratio: _Optional[_Iterable[float]] = ..., ridge: _Optional[_Mapping[str, float]] = ..., compute_seconds: _Optional[float] = ...) -> None: ...
