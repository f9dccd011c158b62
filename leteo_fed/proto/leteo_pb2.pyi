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
    __slots__ = ("n", "bits", "key_id", "threshold")
    N_FIELD_NUMBER: _ClassVar[int]
    BITS_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    n: bytes
    bits: int
    key_id: str
    threshold: ThresholdKeyInfo
    def __init__(self, n: _Optional[bytes] = ..., bits: _Optional[int] = ..., key_id: _Optional[str] = ..., threshold: _Optional[_Union[ThresholdKeyInfo, _Mapping]] = ...) -> None: ...

class ThresholdKeyInfo(_message.Message):
    __slots__ = ("threshold", "holders", "v", "verification", "index")
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    V_FIELD_NUMBER: _ClassVar[int]
    VERIFICATION_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    threshold: int
    holders: int
    v: bytes
    verification: _containers.RepeatedScalarFieldContainer[bytes]
    index: int
    def __init__(self, threshold: _Optional[int] = ..., holders: _Optional[int] = ..., v: _Optional[bytes] = ..., verification: _Optional[_Iterable[bytes]] = ..., index: _Optional[int] = ...) -> None: ...

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
    __slots__ = ("epsilon", "delta", "row_norm_bound", "mu", "quorum", "mechanism", "compositions", "bounds")
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    ROW_NORM_BOUND_FIELD_NUMBER: _ClassVar[int]
    MU_FIELD_NUMBER: _ClassVar[int]
    QUORUM_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    COMPOSITIONS_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    epsilon: float
    delta: float
    row_norm_bound: float
    mu: float
    quorum: int
    mechanism: str
    compositions: int
    bounds: _containers.RepeatedCompositeFieldContainer[ColumnBounds]
    def __init__(self, epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., row_norm_bound: _Optional[float] = ..., mu: _Optional[float] = ..., quorum: _Optional[int] = ..., mechanism: _Optional[str] = ..., compositions: _Optional[int] = ..., bounds: _Optional[_Iterable[_Union[ColumnBounds, _Mapping]]] = ...) -> None: ...

class ColumnBounds(_message.Message):
    __slots__ = ("column", "lower", "upper")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    LOWER_FIELD_NUMBER: _ClassVar[int]
    UPPER_FIELD_NUMBER: _ClassVar[int]
    column: str
    lower: float
    upper: float
    def __init__(self, column: _Optional[str] = ..., lower: _Optional[float] = ..., upper: _Optional[float] = ...) -> None: ...

class ReleaseWarning(_message.Message):
    __slots__ = ("figure", "message")
    FIGURE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    figure: str
    message: str
    def __init__(self, figure: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class Signed(_message.Message):
    __slots__ = ("body", "signature", "certificate")
    BODY_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    signature: bytes
    certificate: bytes
    def __init__(self, body: _Optional[bytes] = ..., signature: _Optional[bytes] = ..., certificate: _Optional[bytes] = ...) -> None: ...

class ShareStatement(_message.Message):
    __slots__ = ("round_id", "site_id", "key_id", "protocol", "invited_root", "n_invited", "quorum", "n_ciphertexts", "ciphertext_digest", "masked", "reveal", "spec_digest")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    SITE_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    INVITED_ROOT_FIELD_NUMBER: _ClassVar[int]
    N_INVITED_FIELD_NUMBER: _ClassVar[int]
    QUORUM_FIELD_NUMBER: _ClassVar[int]
    N_CIPHERTEXTS_FIELD_NUMBER: _ClassVar[int]
    CIPHERTEXT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    MASKED_FIELD_NUMBER: _ClassVar[int]
    REVEAL_FIELD_NUMBER: _ClassVar[int]
    SPEC_DIGEST_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    site_id: str
    key_id: str
    protocol: str
    invited_root: bytes
    n_invited: int
    quorum: int
    n_ciphertexts: int
    ciphertext_digest: bytes
    masked: bool
    reveal: str
    spec_digest: bytes
    def __init__(self, round_id: _Optional[str] = ..., site_id: _Optional[str] = ..., key_id: _Optional[str] = ..., protocol: _Optional[str] = ..., invited_root: _Optional[bytes] = ..., n_invited: _Optional[int] = ..., quorum: _Optional[int] = ..., n_ciphertexts: _Optional[int] = ..., ciphertext_digest: _Optional[bytes] = ..., masked: _Optional[bool] = ..., reveal: _Optional[str] = ..., spec_digest: _Optional[bytes] = ...) -> None: ...

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
    __slots__ = ("column", "mechanism", "epsilon", "domain", "lower", "upper", "consistency", "columns", "box_lower", "box_upper", "box_fit", "bins", "label_column", "classes", "features")
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
    BOX_FIT_FIELD_NUMBER: _ClassVar[int]
    BINS_FIELD_NUMBER: _ClassVar[int]
    LABEL_COLUMN_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
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
    box_fit: str
    bins: int
    label_column: str
    classes: _containers.RepeatedScalarFieldContainer[str]
    features: _containers.RepeatedCompositeFieldContainer[LdpFeatureDomain]
    def __init__(self, column: _Optional[str] = ..., mechanism: _Optional[str] = ..., epsilon: _Optional[float] = ..., domain: _Optional[_Iterable[str]] = ..., lower: _Optional[float] = ..., upper: _Optional[float] = ..., consistency: _Optional[bool] = ..., columns: _Optional[_Iterable[str]] = ..., box_lower: _Optional[_Iterable[float]] = ..., box_upper: _Optional[_Iterable[float]] = ..., box_fit: _Optional[str] = ..., bins: _Optional[int] = ..., label_column: _Optional[str] = ..., classes: _Optional[_Iterable[str]] = ..., features: _Optional[_Iterable[_Union[LdpFeatureDomain, _Mapping]]] = ...) -> None: ...

class LdpFeatureDomain(_message.Message):
    __slots__ = ("name", "values")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    name: str
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., values: _Optional[_Iterable[str]] = ...) -> None: ...

class LdpSpec(_message.Message):
    __slots__ = ("column", "mechanism", "epsilon", "domain", "lower", "upper", "theta", "olh_g", "columns", "box_lower", "box_upper", "box_fit", "bins", "label_column", "classes", "features")
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
    BOX_FIT_FIELD_NUMBER: _ClassVar[int]
    BINS_FIELD_NUMBER: _ClassVar[int]
    LABEL_COLUMN_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
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
    box_fit: str
    bins: int
    label_column: str
    classes: _containers.RepeatedScalarFieldContainer[str]
    features: _containers.RepeatedCompositeFieldContainer[LdpFeatureDomain]
    def __init__(self, column: _Optional[str] = ..., mechanism: _Optional[str] = ..., epsilon: _Optional[float] = ..., domain: _Optional[_Iterable[str]] = ..., lower: _Optional[float] = ..., upper: _Optional[float] = ..., theta: _Optional[float] = ..., olh_g: _Optional[int] = ..., columns: _Optional[_Iterable[str]] = ..., box_lower: _Optional[_Iterable[float]] = ..., box_upper: _Optional[_Iterable[float]] = ..., box_fit: _Optional[str] = ..., bins: _Optional[int] = ..., label_column: _Optional[str] = ..., classes: _Optional[_Iterable[str]] = ..., features: _Optional[_Iterable[_Union[LdpFeatureDomain, _Mapping]]] = ...) -> None: ...

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

class LinregRequest(_message.Message):
    __slots__ = ("features", "label_column", "ridge", "label_bound")
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    LABEL_COLUMN_FIELD_NUMBER: _ClassVar[int]
    RIDGE_FIELD_NUMBER: _ClassVar[int]
    LABEL_BOUND_FIELD_NUMBER: _ClassVar[int]
    features: _containers.RepeatedScalarFieldContainer[str]
    label_column: str
    ridge: float
    label_bound: float
    def __init__(self, features: _Optional[_Iterable[str]] = ..., label_column: _Optional[str] = ..., ridge: _Optional[float] = ..., label_bound: _Optional[float] = ...) -> None: ...

class LinregSpec(_message.Message):
    __slots__ = ("features", "label_column", "label_bound")
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    LABEL_COLUMN_FIELD_NUMBER: _ClassVar[int]
    LABEL_BOUND_FIELD_NUMBER: _ClassVar[int]
    features: _containers.RepeatedScalarFieldContainer[str]
    label_column: str
    label_bound: float
    def __init__(self, features: _Optional[_Iterable[str]] = ..., label_column: _Optional[str] = ..., label_bound: _Optional[float] = ...) -> None: ...

class CrosstabColumn(_message.Message):
    __slots__ = ("name", "domain", "edges")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    name: str
    domain: _containers.RepeatedScalarFieldContainer[str]
    edges: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, name: _Optional[str] = ..., domain: _Optional[_Iterable[str]] = ..., edges: _Optional[_Iterable[float]] = ...) -> None: ...

class CrosstabRequest(_message.Message):
    __slots__ = ("columns",)
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    columns: _containers.RepeatedCompositeFieldContainer[CrosstabColumn]
    def __init__(self, columns: _Optional[_Iterable[_Union[CrosstabColumn, _Mapping]]] = ...) -> None: ...

class CrosstabSpec(_message.Message):
    __slots__ = ("columns",)
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    columns: _containers.RepeatedCompositeFieldContainer[CrosstabColumn]
    def __init__(self, columns: _Optional[_Iterable[_Union[CrosstabColumn, _Mapping]]] = ...) -> None: ...

class QuantilesRequest(_message.Message):
    __slots__ = ("features", "lower", "upper", "percentiles", "bins")
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    LOWER_FIELD_NUMBER: _ClassVar[int]
    UPPER_FIELD_NUMBER: _ClassVar[int]
    PERCENTILES_FIELD_NUMBER: _ClassVar[int]
    BINS_FIELD_NUMBER: _ClassVar[int]
    features: _containers.RepeatedScalarFieldContainer[str]
    lower: float
    upper: float
    percentiles: _containers.RepeatedScalarFieldContainer[float]
    bins: int
    def __init__(self, features: _Optional[_Iterable[str]] = ..., lower: _Optional[float] = ..., upper: _Optional[float] = ..., percentiles: _Optional[_Iterable[float]] = ..., bins: _Optional[int] = ...) -> None: ...

class QuantilesSpec(_message.Message):
    __slots__ = ("features", "lower", "upper", "bins")
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    LOWER_FIELD_NUMBER: _ClassVar[int]
    UPPER_FIELD_NUMBER: _ClassVar[int]
    BINS_FIELD_NUMBER: _ClassVar[int]
    features: _containers.RepeatedScalarFieldContainer[str]
    lower: float
    upper: float
    bins: int
    def __init__(self, features: _Optional[_Iterable[str]] = ..., lower: _Optional[float] = ..., upper: _Optional[float] = ..., bins: _Optional[int] = ...) -> None: ...

class LogregRequest(_message.Message):
    __slots__ = ("features", "label_column", "positive_class", "max_iterations", "tolerance", "coefficient_bound")
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    LABEL_COLUMN_FIELD_NUMBER: _ClassVar[int]
    POSITIVE_CLASS_FIELD_NUMBER: _ClassVar[int]
    MAX_ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    TOLERANCE_FIELD_NUMBER: _ClassVar[int]
    COEFFICIENT_BOUND_FIELD_NUMBER: _ClassVar[int]
    features: _containers.RepeatedScalarFieldContainer[str]
    label_column: str
    positive_class: str
    max_iterations: int
    tolerance: float
    coefficient_bound: float
    def __init__(self, features: _Optional[_Iterable[str]] = ..., label_column: _Optional[str] = ..., positive_class: _Optional[str] = ..., max_iterations: _Optional[int] = ..., tolerance: _Optional[float] = ..., coefficient_bound: _Optional[float] = ...) -> None: ...

class LogregIteration(_message.Message):
    __slots__ = ("job_id", "iteration", "max_iterations", "features", "label_column", "positive_class", "coefficients", "coefficient_bound")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    MAX_ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    LABEL_COLUMN_FIELD_NUMBER: _ClassVar[int]
    POSITIVE_CLASS_FIELD_NUMBER: _ClassVar[int]
    COEFFICIENTS_FIELD_NUMBER: _ClassVar[int]
    COEFFICIENT_BOUND_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    iteration: int
    max_iterations: int
    features: _containers.RepeatedScalarFieldContainer[str]
    label_column: str
    positive_class: str
    coefficients: _containers.RepeatedScalarFieldContainer[float]
    coefficient_bound: float
    def __init__(self, job_id: _Optional[str] = ..., iteration: _Optional[int] = ..., max_iterations: _Optional[int] = ..., features: _Optional[_Iterable[str]] = ..., label_column: _Optional[str] = ..., positive_class: _Optional[str] = ..., coefficients: _Optional[_Iterable[float]] = ..., coefficient_bound: _Optional[float] = ...) -> None: ...

class NaiveBayesDomain(_message.Message):
    __slots__ = ("name", "values")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    name: str
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., values: _Optional[_Iterable[str]] = ...) -> None: ...

class NaiveBayesBound(_message.Message):
    __slots__ = ("name", "lower", "upper")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LOWER_FIELD_NUMBER: _ClassVar[int]
    UPPER_FIELD_NUMBER: _ClassVar[int]
    name: str
    lower: float
    upper: float
    def __init__(self, name: _Optional[str] = ..., lower: _Optional[float] = ..., upper: _Optional[float] = ...) -> None: ...

class NaiveBayesRequest(_message.Message):
    __slots__ = ("features", "domains", "label_column", "classes", "var_smoothing", "alpha", "bounds")
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    DOMAINS_FIELD_NUMBER: _ClassVar[int]
    LABEL_COLUMN_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    VAR_SMOOTHING_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    features: _containers.RepeatedScalarFieldContainer[str]
    domains: _containers.RepeatedCompositeFieldContainer[NaiveBayesDomain]
    label_column: str
    classes: _containers.RepeatedScalarFieldContainer[str]
    var_smoothing: float
    alpha: float
    bounds: _containers.RepeatedCompositeFieldContainer[NaiveBayesBound]
    def __init__(self, features: _Optional[_Iterable[str]] = ..., domains: _Optional[_Iterable[_Union[NaiveBayesDomain, _Mapping]]] = ..., label_column: _Optional[str] = ..., classes: _Optional[_Iterable[str]] = ..., var_smoothing: _Optional[float] = ..., alpha: _Optional[float] = ..., bounds: _Optional[_Iterable[_Union[NaiveBayesBound, _Mapping]]] = ...) -> None: ...

class NaiveBayesSpec(_message.Message):
    __slots__ = ("features", "domains", "label_column", "classes", "bounds")
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    DOMAINS_FIELD_NUMBER: _ClassVar[int]
    LABEL_COLUMN_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    features: _containers.RepeatedScalarFieldContainer[str]
    domains: _containers.RepeatedCompositeFieldContainer[NaiveBayesDomain]
    label_column: str
    classes: _containers.RepeatedScalarFieldContainer[str]
    bounds: _containers.RepeatedCompositeFieldContainer[NaiveBayesBound]
    def __init__(self, features: _Optional[_Iterable[str]] = ..., domains: _Optional[_Iterable[_Union[NaiveBayesDomain, _Mapping]]] = ..., label_column: _Optional[str] = ..., classes: _Optional[_Iterable[str]] = ..., bounds: _Optional[_Iterable[_Union[NaiveBayesBound, _Mapping]]] = ...) -> None: ...

class CorrelationRequest(_message.Message):
    __slots__ = ("features", "confidence")
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    features: _containers.RepeatedScalarFieldContainer[str]
    confidence: float
    def __init__(self, features: _Optional[_Iterable[str]] = ..., confidence: _Optional[float] = ...) -> None: ...

class CorrelationSpec(_message.Message):
    __slots__ = ("features", "confidence")
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    features: _containers.RepeatedScalarFieldContainer[str]
    confidence: float
    def __init__(self, features: _Optional[_Iterable[str]] = ..., confidence: _Optional[float] = ...) -> None: ...

class StatisticRequest(_message.Message):
    __slots__ = ("name", "version", "params_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    params_json: str
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., params_json: _Optional[str] = ...) -> None: ...

class StatisticSpec(_message.Message):
    __slots__ = ("name", "version", "params_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    params_json: str
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., params_json: _Optional[str] = ...) -> None: ...

class RoundRequest(_message.Message):
    __slots__ = ("min_owners", "deadline_seconds", "scale_bits", "value_bound", "owners_root", "n_owners", "dp_epsilon", "dp_delta", "row_norm_bound", "bounds", "nonce", "issued_unix", "moments", "kmeans", "ldp", "weighted_stats", "linreg", "crosstab", "quantiles", "logreg", "naive_bayes", "correlation", "statistic")
    MIN_OWNERS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SCALE_BITS_FIELD_NUMBER: _ClassVar[int]
    VALUE_BOUND_FIELD_NUMBER: _ClassVar[int]
    OWNERS_ROOT_FIELD_NUMBER: _ClassVar[int]
    N_OWNERS_FIELD_NUMBER: _ClassVar[int]
    DP_EPSILON_FIELD_NUMBER: _ClassVar[int]
    DP_DELTA_FIELD_NUMBER: _ClassVar[int]
    ROW_NORM_BOUND_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    ISSUED_UNIX_FIELD_NUMBER: _ClassVar[int]
    MOMENTS_FIELD_NUMBER: _ClassVar[int]
    KMEANS_FIELD_NUMBER: _ClassVar[int]
    LDP_FIELD_NUMBER: _ClassVar[int]
    WEIGHTED_STATS_FIELD_NUMBER: _ClassVar[int]
    LINREG_FIELD_NUMBER: _ClassVar[int]
    CROSSTAB_FIELD_NUMBER: _ClassVar[int]
    QUANTILES_FIELD_NUMBER: _ClassVar[int]
    LOGREG_FIELD_NUMBER: _ClassVar[int]
    NAIVE_BAYES_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_FIELD_NUMBER: _ClassVar[int]
    STATISTIC_FIELD_NUMBER: _ClassVar[int]
    min_owners: int
    deadline_seconds: float
    scale_bits: int
    value_bound: float
    owners_root: bytes
    n_owners: int
    dp_epsilon: float
    dp_delta: float
    row_norm_bound: float
    bounds: _containers.RepeatedCompositeFieldContainer[ColumnBounds]
    nonce: str
    issued_unix: float
    moments: MomentsRequest
    kmeans: KmeansRequest
    ldp: LdpRequest
    weighted_stats: WeightedStatsRequest
    linreg: LinregRequest
    crosstab: CrosstabRequest
    quantiles: QuantilesRequest
    logreg: LogregRequest
    naive_bayes: NaiveBayesRequest
    correlation: CorrelationRequest
    statistic: StatisticRequest
    def __init__(self, min_owners: _Optional[int] = ..., deadline_seconds: _Optional[float] = ..., scale_bits: _Optional[int] = ..., value_bound: _Optional[float] = ..., owners_root: _Optional[bytes] = ..., n_owners: _Optional[int] = ..., dp_epsilon: _Optional[float] = ..., dp_delta: _Optional[float] = ..., row_norm_bound: _Optional[float] = ..., bounds: _Optional[_Iterable[_Union[ColumnBounds, _Mapping]]] = ..., nonce: _Optional[str] = ..., issued_unix: _Optional[float] = ..., moments: _Optional[_Union[MomentsRequest, _Mapping]] = ..., kmeans: _Optional[_Union[KmeansRequest, _Mapping]] = ..., ldp: _Optional[_Union[LdpRequest, _Mapping]] = ..., weighted_stats: _Optional[_Union[WeightedStatsRequest, _Mapping]] = ..., linreg: _Optional[_Union[LinregRequest, _Mapping]] = ..., crosstab: _Optional[_Union[CrosstabRequest, _Mapping]] = ..., quantiles: _Optional[_Union[QuantilesRequest, _Mapping]] = ..., logreg: _Optional[_Union[LogregRequest, _Mapping]] = ..., naive_bayes: _Optional[_Union[NaiveBayesRequest, _Mapping]] = ..., correlation: _Optional[_Union[CorrelationRequest, _Mapping]] = ..., statistic: _Optional[_Union[StatisticRequest, _Mapping]] = ...) -> None: ...

class RoundSpec(_message.Message):
    __slots__ = ("round_id", "protocol", "encoding", "key_id", "deadline_unix", "n_values", "n_ciphertexts", "dp", "min_owners", "authorization", "job_id", "invited_root", "n_invited", "membership", "moments", "kmeans", "ldp", "weighted_stats", "linreg", "crosstab", "quantiles", "logreg", "naive_bayes", "correlation", "statistic")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_UNIX_FIELD_NUMBER: _ClassVar[int]
    N_VALUES_FIELD_NUMBER: _ClassVar[int]
    N_CIPHERTEXTS_FIELD_NUMBER: _ClassVar[int]
    DP_FIELD_NUMBER: _ClassVar[int]
    MIN_OWNERS_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    INVITED_ROOT_FIELD_NUMBER: _ClassVar[int]
    N_INVITED_FIELD_NUMBER: _ClassVar[int]
    MEMBERSHIP_FIELD_NUMBER: _ClassVar[int]
    MOMENTS_FIELD_NUMBER: _ClassVar[int]
    KMEANS_FIELD_NUMBER: _ClassVar[int]
    LDP_FIELD_NUMBER: _ClassVar[int]
    WEIGHTED_STATS_FIELD_NUMBER: _ClassVar[int]
    LINREG_FIELD_NUMBER: _ClassVar[int]
    CROSSTAB_FIELD_NUMBER: _ClassVar[int]
    QUANTILES_FIELD_NUMBER: _ClassVar[int]
    LOGREG_FIELD_NUMBER: _ClassVar[int]
    NAIVE_BAYES_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_FIELD_NUMBER: _ClassVar[int]
    STATISTIC_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    protocol: str
    encoding: Encoding
    key_id: str
    deadline_unix: float
    n_values: int
    n_ciphertexts: int
    dp: DpSpec
    min_owners: int
    authorization: Signed
    job_id: str
    invited_root: bytes
    n_invited: int
    membership: Membership
    moments: MomentsSpec
    kmeans: KmeansIteration
    ldp: LdpSpec
    weighted_stats: WeightedStatsSpec
    linreg: LinregSpec
    crosstab: CrosstabSpec
    quantiles: QuantilesSpec
    logreg: LogregIteration
    naive_bayes: NaiveBayesSpec
    correlation: CorrelationSpec
    statistic: StatisticSpec
    def __init__(self, round_id: _Optional[str] = ..., protocol: _Optional[str] = ..., encoding: _Optional[_Union[Encoding, _Mapping]] = ..., key_id: _Optional[str] = ..., deadline_unix: _Optional[float] = ..., n_values: _Optional[int] = ..., n_ciphertexts: _Optional[int] = ..., dp: _Optional[_Union[DpSpec, _Mapping]] = ..., min_owners: _Optional[int] = ..., authorization: _Optional[_Union[Signed, _Mapping]] = ..., job_id: _Optional[str] = ..., invited_root: _Optional[bytes] = ..., n_invited: _Optional[int] = ..., membership: _Optional[_Union[Membership, _Mapping]] = ..., moments: _Optional[_Union[MomentsSpec, _Mapping]] = ..., kmeans: _Optional[_Union[KmeansIteration, _Mapping]] = ..., ldp: _Optional[_Union[LdpSpec, _Mapping]] = ..., weighted_stats: _Optional[_Union[WeightedStatsSpec, _Mapping]] = ..., linreg: _Optional[_Union[LinregSpec, _Mapping]] = ..., crosstab: _Optional[_Union[CrosstabSpec, _Mapping]] = ..., quantiles: _Optional[_Union[QuantilesSpec, _Mapping]] = ..., logreg: _Optional[_Union[LogregIteration, _Mapping]] = ..., naive_bayes: _Optional[_Union[NaiveBayesSpec, _Mapping]] = ..., correlation: _Optional[_Union[CorrelationSpec, _Mapping]] = ..., statistic: _Optional[_Union[StatisticSpec, _Mapping]] = ...) -> None: ...

class Membership(_message.Message):
    __slots__ = ("index", "siblings")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    SIBLINGS_FIELD_NUMBER: _ClassVar[int]
    index: int
    siblings: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, index: _Optional[int] = ..., siblings: _Optional[_Iterable[bytes]] = ...) -> None: ...

class StartRoundRequest(_message.Message):
    __slots__ = ("request", "owners")
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    request: Signed
    owners: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, request: _Optional[_Union[Signed, _Mapping]] = ..., owners: _Optional[_Iterable[str]] = ...) -> None: ...

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
    __slots__ = ("round_id", "site_id", "key_id", "dimension", "encoding", "n_ciphertexts", "timings", "statement", "mask_seed")
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
    STATEMENT_FIELD_NUMBER: _ClassVar[int]
    MASK_SEED_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    site_id: str
    key_id: str
    dimension: int
    encoding: Encoding
    n_ciphertexts: int
    timings: _containers.ScalarMap[str, float]
    statement: Signed
    mask_seed: bytes
    def __init__(self, round_id: _Optional[str] = ..., site_id: _Optional[str] = ..., key_id: _Optional[str] = ..., dimension: _Optional[int] = ..., encoding: _Optional[_Union[Encoding, _Mapping]] = ..., n_ciphertexts: _Optional[int] = ..., timings: _Optional[_Mapping[str, float]] = ..., statement: _Optional[_Union[Signed, _Mapping]] = ..., mask_seed: _Optional[bytes] = ...) -> None: ...

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
    __slots__ = ("site_id", "address", "mode", "connected", "last_seen_unix", "idle")
    SITE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_UNIX_FIELD_NUMBER: _ClassVar[int]
    IDLE_FIELD_NUMBER: _ClassVar[int]
    site_id: str
    address: str
    mode: str
    connected: bool
    last_seen_unix: float
    idle: bool
    def __init__(self, site_id: _Optional[str] = ..., address: _Optional[str] = ..., mode: _Optional[str] = ..., connected: _Optional[bool] = ..., last_seen_unix: _Optional[float] = ..., idle: _Optional[bool] = ...) -> None: ...

class RemoveOwnersRequest(_message.Message):
    __slots__ = ("site_ids",)
    SITE_IDS_FIELD_NUMBER: _ClassVar[int]
    site_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, site_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class OwnerHello(_message.Message):
    __slots__ = ("site_id", "version", "awaiting", "instance")
    SITE_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    AWAITING_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    site_id: str
    version: str
    awaiting: _containers.RepeatedScalarFieldContainer[str]
    instance: str
    def __init__(self, site_id: _Optional[str] = ..., version: _Optional[str] = ..., awaiting: _Optional[_Iterable[str]] = ..., instance: _Optional[str] = ...) -> None: ...

class OwnerTask(_message.Message):
    __slots__ = ("invite", "result", "heartbeat")
    INVITE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    invite: RoundSpec
    result: RoundStatus
    heartbeat: Heartbeat
    def __init__(self, invite: _Optional[_Union[RoundSpec, _Mapping]] = ..., result: _Optional[_Union[RoundStatus, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("sent_unix",)
    SENT_UNIX_FIELD_NUMBER: _ClassVar[int]
    sent_unix: float
    def __init__(self, sent_unix: _Optional[float] = ...) -> None: ...

class InviteAnswer(_message.Message):
    __slots__ = ("round_id", "site_id", "accepted", "reason")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    SITE_ID_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    site_id: str
    accepted: bool
    reason: str
    def __init__(self, round_id: _Optional[str] = ..., site_id: _Optional[str] = ..., accepted: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class OwnerList(_message.Message):
    __slots__ = ("owners",)
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    owners: _containers.RepeatedCompositeFieldContainer[OwnerRegistration]
    def __init__(self, owners: _Optional[_Iterable[_Union[OwnerRegistration, _Mapping]]] = ...) -> None: ...

class ListOwnersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Vector(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, values: _Optional[_Iterable[float]] = ...) -> None: ...

class Timing(_message.Message):
    __slots__ = ("seconds",)
    class SecondsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    seconds: _containers.ScalarMap[str, float]
    def __init__(self, seconds: _Optional[_Mapping[str, float]] = ...) -> None: ...

class RoundTimings(_message.Message):
    __slots__ = ("owners", "aggregator", "csp")
    class OwnersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Timing
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Timing, _Mapping]] = ...) -> None: ...
    class AggregatorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class CspEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    AGGREGATOR_FIELD_NUMBER: _ClassVar[int]
    CSP_FIELD_NUMBER: _ClassVar[int]
    owners: _containers.MessageMap[str, Timing]
    aggregator: _containers.ScalarMap[str, float]
    csp: _containers.ScalarMap[str, float]
    def __init__(self, owners: _Optional[_Mapping[str, Timing]] = ..., aggregator: _Optional[_Mapping[str, float]] = ..., csp: _Optional[_Mapping[str, float]] = ...) -> None: ...

class EncodingFacts(_message.Message):
    __slots__ = ("scale_bits", "count_scale_bits", "value_bound", "slot_bits", "slots_per_ciphertext", "mask_bits", "statistical_security_bits", "values_per_share", "ciphertexts_per_share", "paillier_bits")
    SCALE_BITS_FIELD_NUMBER: _ClassVar[int]
    COUNT_SCALE_BITS_FIELD_NUMBER: _ClassVar[int]
    VALUE_BOUND_FIELD_NUMBER: _ClassVar[int]
    SLOT_BITS_FIELD_NUMBER: _ClassVar[int]
    SLOTS_PER_CIPHERTEXT_FIELD_NUMBER: _ClassVar[int]
    MASK_BITS_FIELD_NUMBER: _ClassVar[int]
    STATISTICAL_SECURITY_BITS_FIELD_NUMBER: _ClassVar[int]
    VALUES_PER_SHARE_FIELD_NUMBER: _ClassVar[int]
    CIPHERTEXTS_PER_SHARE_FIELD_NUMBER: _ClassVar[int]
    PAILLIER_BITS_FIELD_NUMBER: _ClassVar[int]
    scale_bits: int
    count_scale_bits: int
    value_bound: float
    slot_bits: int
    slots_per_ciphertext: int
    mask_bits: int
    statistical_security_bits: int
    values_per_share: int
    ciphertexts_per_share: int
    paillier_bits: int
    def __init__(self, scale_bits: _Optional[int] = ..., count_scale_bits: _Optional[int] = ..., value_bound: _Optional[float] = ..., slot_bits: _Optional[int] = ..., slots_per_ciphertext: _Optional[int] = ..., mask_bits: _Optional[int] = ..., statistical_security_bits: _Optional[int] = ..., values_per_share: _Optional[int] = ..., ciphertexts_per_share: _Optional[int] = ..., paillier_bits: _Optional[int] = ...) -> None: ...

class DpFacts(_message.Message):
    __slots__ = ("mechanism", "epsilon", "delta", "row_norm_bound", "quorum", "sensitivity_l1", "sensitivity_l2", "skellam_mu_aggregate", "noise_std_per_value", "post_processing", "note", "bounds", "clipped_rows", "figure_noise_std", "warnings", "figures")
    class FigureNoiseStdEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class FiguresEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    ROW_NORM_BOUND_FIELD_NUMBER: _ClassVar[int]
    QUORUM_FIELD_NUMBER: _ClassVar[int]
    SENSITIVITY_L1_FIELD_NUMBER: _ClassVar[int]
    SENSITIVITY_L2_FIELD_NUMBER: _ClassVar[int]
    SKELLAM_MU_AGGREGATE_FIELD_NUMBER: _ClassVar[int]
    NOISE_STD_PER_VALUE_FIELD_NUMBER: _ClassVar[int]
    POST_PROCESSING_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    CLIPPED_ROWS_FIELD_NUMBER: _ClassVar[int]
    FIGURE_NOISE_STD_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    FIGURES_FIELD_NUMBER: _ClassVar[int]
    mechanism: str
    epsilon: float
    delta: float
    row_norm_bound: float
    quorum: int
    sensitivity_l1: float
    sensitivity_l2: float
    skellam_mu_aggregate: float
    noise_std_per_value: float
    post_processing: str
    note: str
    bounds: _containers.RepeatedCompositeFieldContainer[ColumnBounds]
    clipped_rows: float
    figure_noise_std: _containers.ScalarMap[str, float]
    warnings: _containers.RepeatedCompositeFieldContainer[ReleaseWarning]
    figures: _containers.ScalarMap[str, float]
    def __init__(self, mechanism: _Optional[str] = ..., epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., row_norm_bound: _Optional[float] = ..., quorum: _Optional[int] = ..., sensitivity_l1: _Optional[float] = ..., sensitivity_l2: _Optional[float] = ..., skellam_mu_aggregate: _Optional[float] = ..., noise_std_per_value: _Optional[float] = ..., post_processing: _Optional[str] = ..., note: _Optional[str] = ..., bounds: _Optional[_Iterable[_Union[ColumnBounds, _Mapping]]] = ..., clipped_rows: _Optional[float] = ..., figure_noise_std: _Optional[_Mapping[str, float]] = ..., warnings: _Optional[_Iterable[_Union[ReleaseWarning, _Mapping]]] = ..., figures: _Optional[_Mapping[str, float]] = ...) -> None: ...

class KmeansDpFacts(_message.Message):
    __slots__ = ("mechanism", "epsilon", "delta", "row_norm_bound", "quorum", "sensitivity_l1", "sensitivity_l2", "composition", "iterations_budgeted", "epsilon_per_iteration", "delta_per_iteration", "epsilon_spent", "delta_spent", "skellam_mu_per_iteration", "noise_std_sum_with_quorum", "noise_std_count_with_quorum", "post_processing", "note", "accountant", "bounds", "clipped_rows", "figures", "figure_noise_std", "warnings")
    class FiguresEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class FigureNoiseStdEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    ROW_NORM_BOUND_FIELD_NUMBER: _ClassVar[int]
    QUORUM_FIELD_NUMBER: _ClassVar[int]
    SENSITIVITY_L1_FIELD_NUMBER: _ClassVar[int]
    SENSITIVITY_L2_FIELD_NUMBER: _ClassVar[int]
    COMPOSITION_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_BUDGETED_FIELD_NUMBER: _ClassVar[int]
    EPSILON_PER_ITERATION_FIELD_NUMBER: _ClassVar[int]
    DELTA_PER_ITERATION_FIELD_NUMBER: _ClassVar[int]
    EPSILON_SPENT_FIELD_NUMBER: _ClassVar[int]
    DELTA_SPENT_FIELD_NUMBER: _ClassVar[int]
    SKELLAM_MU_PER_ITERATION_FIELD_NUMBER: _ClassVar[int]
    NOISE_STD_SUM_WITH_QUORUM_FIELD_NUMBER: _ClassVar[int]
    NOISE_STD_COUNT_WITH_QUORUM_FIELD_NUMBER: _ClassVar[int]
    POST_PROCESSING_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    ACCOUNTANT_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    CLIPPED_ROWS_FIELD_NUMBER: _ClassVar[int]
    FIGURES_FIELD_NUMBER: _ClassVar[int]
    FIGURE_NOISE_STD_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    mechanism: str
    epsilon: float
    delta: float
    row_norm_bound: float
    quorum: int
    sensitivity_l1: float
    sensitivity_l2: float
    composition: str
    iterations_budgeted: int
    epsilon_per_iteration: float
    delta_per_iteration: float
    epsilon_spent: float
    delta_spent: float
    skellam_mu_per_iteration: float
    noise_std_sum_with_quorum: float
    noise_std_count_with_quorum: float
    post_processing: str
    note: str
    accountant: str
    bounds: _containers.RepeatedCompositeFieldContainer[ColumnBounds]
    clipped_rows: float
    figures: _containers.ScalarMap[str, float]
    figure_noise_std: _containers.ScalarMap[str, float]
    warnings: _containers.RepeatedCompositeFieldContainer[ReleaseWarning]
    def __init__(self, mechanism: _Optional[str] = ..., epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., row_norm_bound: _Optional[float] = ..., quorum: _Optional[int] = ..., sensitivity_l1: _Optional[float] = ..., sensitivity_l2: _Optional[float] = ..., composition: _Optional[str] = ..., iterations_budgeted: _Optional[int] = ..., epsilon_per_iteration: _Optional[float] = ..., delta_per_iteration: _Optional[float] = ..., epsilon_spent: _Optional[float] = ..., delta_spent: _Optional[float] = ..., skellam_mu_per_iteration: _Optional[float] = ..., noise_std_sum_with_quorum: _Optional[float] = ..., noise_std_count_with_quorum: _Optional[float] = ..., post_processing: _Optional[str] = ..., note: _Optional[str] = ..., accountant: _Optional[str] = ..., bounds: _Optional[_Iterable[_Union[ColumnBounds, _Mapping]]] = ..., clipped_rows: _Optional[float] = ..., figures: _Optional[_Mapping[str, float]] = ..., figure_noise_std: _Optional[_Mapping[str, float]] = ..., warnings: _Optional[_Iterable[_Union[ReleaseWarning, _Mapping]]] = ...) -> None: ...

class PcaResult(_message.Message):
    __slots__ = ("protocol", "features", "n_samples", "eigenvalues", "eigenvalue_normalization", "components", "explained_variance_ratio", "mean", "standardized", "round_id", "owners", "declined", "encoding", "timings", "dp")
    class DeclinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    N_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    EIGENVALUES_FIELD_NUMBER: _ClassVar[int]
    EIGENVALUE_NORMALIZATION_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    EXPLAINED_VARIANCE_RATIO_FIELD_NUMBER: _ClassVar[int]
    MEAN_FIELD_NUMBER: _ClassVar[int]
    STANDARDIZED_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    DP_FIELD_NUMBER: _ClassVar[int]
    protocol: str
    features: _containers.RepeatedScalarFieldContainer[str]
    n_samples: int
    eigenvalues: _containers.RepeatedScalarFieldContainer[float]
    eigenvalue_normalization: str
    components: _containers.RepeatedCompositeFieldContainer[Vector]
    explained_variance_ratio: _containers.RepeatedScalarFieldContainer[float]
    mean: _containers.RepeatedScalarFieldContainer[float]
    standardized: bool
    round_id: str
    owners: _containers.RepeatedScalarFieldContainer[str]
    declined: _containers.ScalarMap[str, str]
    encoding: EncodingFacts
    timings: RoundTimings
    dp: DpFacts
    def __init__(self, protocol: _Optional[str] = ..., features: _Optional[_Iterable[str]] = ..., n_samples: _Optional[int] = ..., eigenvalues: _Optional[_Iterable[float]] = ..., eigenvalue_normalization: _Optional[str] = ..., components: _Optional[_Iterable[_Union[Vector, _Mapping]]] = ..., explained_variance_ratio: _Optional[_Iterable[float]] = ..., mean: _Optional[_Iterable[float]] = ..., standardized: _Optional[bool] = ..., round_id: _Optional[str] = ..., owners: _Optional[_Iterable[str]] = ..., declined: _Optional[_Mapping[str, str]] = ..., encoding: _Optional[_Union[EncodingFacts, _Mapping]] = ..., timings: _Optional[_Union[RoundTimings, _Mapping]] = ..., dp: _Optional[_Union[DpFacts, _Mapping]] = ...) -> None: ...

class DiscriminantResult(_message.Message):
    __slots__ = ("protocol", "method", "features", "classes", "n_samples", "eigenvalues", "components", "mean", "ridge", "pencil", "privacy_classes", "round_id", "owners", "declined", "encoding", "timings", "dp")
    class RidgeEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class DeclinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    N_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    EIGENVALUES_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    MEAN_FIELD_NUMBER: _ClassVar[int]
    RIDGE_FIELD_NUMBER: _ClassVar[int]
    PENCIL_FIELD_NUMBER: _ClassVar[int]
    PRIVACY_CLASSES_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    DP_FIELD_NUMBER: _ClassVar[int]
    protocol: str
    method: str
    features: _containers.RepeatedScalarFieldContainer[str]
    classes: _containers.RepeatedScalarFieldContainer[str]
    n_samples: int
    eigenvalues: _containers.RepeatedScalarFieldContainer[float]
    components: _containers.RepeatedCompositeFieldContainer[Vector]
    mean: _containers.RepeatedScalarFieldContainer[float]
    ridge: _containers.ScalarMap[str, float]
    pencil: str
    privacy_classes: _containers.RepeatedScalarFieldContainer[str]
    round_id: str
    owners: _containers.RepeatedScalarFieldContainer[str]
    declined: _containers.ScalarMap[str, str]
    encoding: EncodingFacts
    timings: RoundTimings
    dp: DpFacts
    def __init__(self, protocol: _Optional[str] = ..., method: _Optional[str] = ..., features: _Optional[_Iterable[str]] = ..., classes: _Optional[_Iterable[str]] = ..., n_samples: _Optional[int] = ..., eigenvalues: _Optional[_Iterable[float]] = ..., components: _Optional[_Iterable[_Union[Vector, _Mapping]]] = ..., mean: _Optional[_Iterable[float]] = ..., ridge: _Optional[_Mapping[str, float]] = ..., pencil: _Optional[str] = ..., privacy_classes: _Optional[_Iterable[str]] = ..., round_id: _Optional[str] = ..., owners: _Optional[_Iterable[str]] = ..., declined: _Optional[_Mapping[str, str]] = ..., encoding: _Optional[_Union[EncodingFacts, _Mapping]] = ..., timings: _Optional[_Union[RoundTimings, _Mapping]] = ..., dp: _Optional[_Union[DpFacts, _Mapping]] = ...) -> None: ...

class ProjectionOnlyResult(_message.Message):
    __slots__ = ("protocol", "method", "mode", "features", "eigenvalues", "components", "explained_variance_ratio", "standardized", "classes", "ridge", "privacy_classes", "round_id", "owners", "declined", "encoding", "timings", "dp", "n_samples")
    class RidgeEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class DeclinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    EIGENVALUES_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    EXPLAINED_VARIANCE_RATIO_FIELD_NUMBER: _ClassVar[int]
    STANDARDIZED_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    RIDGE_FIELD_NUMBER: _ClassVar[int]
    PRIVACY_CLASSES_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    DP_FIELD_NUMBER: _ClassVar[int]
    N_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    protocol: str
    method: str
    mode: str
    features: _containers.RepeatedScalarFieldContainer[str]
    eigenvalues: _containers.RepeatedScalarFieldContainer[float]
    components: _containers.RepeatedCompositeFieldContainer[Vector]
    explained_variance_ratio: _containers.RepeatedScalarFieldContainer[float]
    standardized: bool
    classes: _containers.RepeatedScalarFieldContainer[str]
    ridge: _containers.ScalarMap[str, float]
    privacy_classes: _containers.RepeatedScalarFieldContainer[str]
    round_id: str
    owners: _containers.RepeatedScalarFieldContainer[str]
    declined: _containers.ScalarMap[str, str]
    encoding: EncodingFacts
    timings: RoundTimings
    dp: DpFacts
    n_samples: int
    def __init__(self, protocol: _Optional[str] = ..., method: _Optional[str] = ..., mode: _Optional[str] = ..., features: _Optional[_Iterable[str]] = ..., eigenvalues: _Optional[_Iterable[float]] = ..., components: _Optional[_Iterable[_Union[Vector, _Mapping]]] = ..., explained_variance_ratio: _Optional[_Iterable[float]] = ..., standardized: _Optional[bool] = ..., classes: _Optional[_Iterable[str]] = ..., ridge: _Optional[_Mapping[str, float]] = ..., privacy_classes: _Optional[_Iterable[str]] = ..., round_id: _Optional[str] = ..., owners: _Optional[_Iterable[str]] = ..., declined: _Optional[_Mapping[str, str]] = ..., encoding: _Optional[_Union[EncodingFacts, _Mapping]] = ..., timings: _Optional[_Union[RoundTimings, _Mapping]] = ..., dp: _Optional[_Union[DpFacts, _Mapping]] = ..., n_samples: _Optional[int] = ...) -> None: ...

class KmeansIterationResult(_message.Message):
    __slots__ = ("protocol", "method", "job_id", "iteration", "iterations", "features", "k", "centers", "center_shift", "round_id", "owners")
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    CENTERS_FIELD_NUMBER: _ClassVar[int]
    CENTER_SHIFT_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    protocol: str
    method: str
    job_id: str
    iteration: int
    iterations: int
    features: _containers.RepeatedScalarFieldContainer[str]
    k: int
    centers: _containers.RepeatedCompositeFieldContainer[Vector]
    center_shift: float
    round_id: str
    owners: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, protocol: _Optional[str] = ..., method: _Optional[str] = ..., job_id: _Optional[str] = ..., iteration: _Optional[int] = ..., iterations: _Optional[int] = ..., features: _Optional[_Iterable[str]] = ..., k: _Optional[int] = ..., centers: _Optional[_Iterable[_Union[Vector, _Mapping]]] = ..., center_shift: _Optional[float] = ..., round_id: _Optional[str] = ..., owners: _Optional[_Iterable[str]] = ...) -> None: ...

class KmeansIterationTimings(_message.Message):
    __slots__ = ("round_seconds", "owners", "aggregator", "csp")
    class OwnersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Timing
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Timing, _Mapping]] = ...) -> None: ...
    class AggregatorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class CspEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ROUND_SECONDS_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    AGGREGATOR_FIELD_NUMBER: _ClassVar[int]
    CSP_FIELD_NUMBER: _ClassVar[int]
    round_seconds: float
    owners: _containers.MessageMap[str, Timing]
    aggregator: _containers.ScalarMap[str, float]
    csp: _containers.ScalarMap[str, float]
    def __init__(self, round_seconds: _Optional[float] = ..., owners: _Optional[_Mapping[str, Timing]] = ..., aggregator: _Optional[_Mapping[str, float]] = ..., csp: _Optional[_Mapping[str, float]] = ...) -> None: ...

class KmeansIterationSummary(_message.Message):
    __slots__ = ("iteration", "round_id", "contributors", "declined", "missing", "center_shift", "counts", "empty_clusters", "centers", "timings")
    class DeclinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    CONTRIBUTORS_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    CENTER_SHIFT_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    EMPTY_CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    CENTERS_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    iteration: int
    round_id: str
    contributors: _containers.RepeatedScalarFieldContainer[str]
    declined: _containers.ScalarMap[str, str]
    missing: _containers.RepeatedScalarFieldContainer[str]
    center_shift: float
    counts: _containers.RepeatedScalarFieldContainer[int]
    empty_clusters: _containers.RepeatedScalarFieldContainer[int]
    centers: _containers.RepeatedCompositeFieldContainer[Vector]
    timings: KmeansIterationTimings
    def __init__(self, iteration: _Optional[int] = ..., round_id: _Optional[str] = ..., contributors: _Optional[_Iterable[str]] = ..., declined: _Optional[_Mapping[str, str]] = ..., missing: _Optional[_Iterable[str]] = ..., center_shift: _Optional[float] = ..., counts: _Optional[_Iterable[int]] = ..., empty_clusters: _Optional[_Iterable[int]] = ..., centers: _Optional[_Iterable[_Union[Vector, _Mapping]]] = ..., timings: _Optional[_Union[KmeansIterationTimings, _Mapping]] = ...) -> None: ...

class KmeansJobTimings(_message.Message):
    __slots__ = ("total_seconds", "iteration_seconds", "mean_iteration_seconds")
    TOTAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ITERATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MEAN_ITERATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    total_seconds: float
    iteration_seconds: _containers.RepeatedScalarFieldContainer[float]
    mean_iteration_seconds: float
    def __init__(self, total_seconds: _Optional[float] = ..., iteration_seconds: _Optional[_Iterable[float]] = ..., mean_iteration_seconds: _Optional[float] = ...) -> None: ...

class KmeansJobResult(_message.Message):
    __slots__ = ("method", "protocol", "job_id", "features", "k", "centers", "initial_centers", "counts", "epsilon", "delta", "iterations_run", "max_iterations", "tolerance", "converged", "empty_cluster_rule", "invited", "owners", "iterations", "encoding", "dp", "timings")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    CENTERS_FIELD_NUMBER: _ClassVar[int]
    INITIAL_CENTERS_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_RUN_FIELD_NUMBER: _ClassVar[int]
    MAX_ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    TOLERANCE_FIELD_NUMBER: _ClassVar[int]
    CONVERGED_FIELD_NUMBER: _ClassVar[int]
    EMPTY_CLUSTER_RULE_FIELD_NUMBER: _ClassVar[int]
    INVITED_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    DP_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    method: str
    protocol: str
    job_id: str
    features: _containers.RepeatedScalarFieldContainer[str]
    k: int
    centers: _containers.RepeatedCompositeFieldContainer[Vector]
    initial_centers: _containers.RepeatedCompositeFieldContainer[Vector]
    counts: _containers.RepeatedScalarFieldContainer[int]
    epsilon: float
    delta: float
    iterations_run: int
    max_iterations: int
    tolerance: float
    converged: bool
    empty_cluster_rule: str
    invited: _containers.RepeatedScalarFieldContainer[str]
    owners: _containers.RepeatedScalarFieldContainer[str]
    iterations: _containers.RepeatedCompositeFieldContainer[KmeansIterationSummary]
    encoding: EncodingFacts
    dp: KmeansDpFacts
    timings: KmeansJobTimings
    def __init__(self, method: _Optional[str] = ..., protocol: _Optional[str] = ..., job_id: _Optional[str] = ..., features: _Optional[_Iterable[str]] = ..., k: _Optional[int] = ..., centers: _Optional[_Iterable[_Union[Vector, _Mapping]]] = ..., initial_centers: _Optional[_Iterable[_Union[Vector, _Mapping]]] = ..., counts: _Optional[_Iterable[int]] = ..., epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., iterations_run: _Optional[int] = ..., max_iterations: _Optional[int] = ..., tolerance: _Optional[float] = ..., converged: _Optional[bool] = ..., empty_cluster_rule: _Optional[str] = ..., invited: _Optional[_Iterable[str]] = ..., owners: _Optional[_Iterable[str]] = ..., iterations: _Optional[_Iterable[_Union[KmeansIterationSummary, _Mapping]]] = ..., encoding: _Optional[_Union[EncodingFacts, _Mapping]] = ..., dp: _Optional[_Union[KmeansDpFacts, _Mapping]] = ..., timings: _Optional[_Union[KmeansJobTimings, _Mapping]] = ...) -> None: ...

class ReportTimings(_message.Message):
    __slots__ = ("owners", "aggregator")
    class OwnersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Timing
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Timing, _Mapping]] = ...) -> None: ...
    class AggregatorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    AGGREGATOR_FIELD_NUMBER: _ClassVar[int]
    owners: _containers.MessageMap[str, Timing]
    aggregator: _containers.ScalarMap[str, float]
    def __init__(self, owners: _Optional[_Mapping[str, Timing]] = ..., aggregator: _Optional[_Mapping[str, float]] = ...) -> None: ...

class LdpFrequencyResult(_message.Message):
    __slots__ = ("protocol", "mechanism", "epsilon", "column", "n", "engine", "estimates", "std_errors", "estimator", "consistent_estimates", "consistency", "round_id", "owners", "declined", "timings")
    class EstimatesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class StdErrorsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class ConsistentEstimatesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class DeclinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    ESTIMATES_FIELD_NUMBER: _ClassVar[int]
    STD_ERRORS_FIELD_NUMBER: _ClassVar[int]
    ESTIMATOR_FIELD_NUMBER: _ClassVar[int]
    CONSISTENT_ESTIMATES_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    protocol: str
    mechanism: str
    epsilon: float
    column: str
    n: int
    engine: str
    estimates: _containers.ScalarMap[str, float]
    std_errors: _containers.ScalarMap[str, float]
    estimator: str
    consistent_estimates: _containers.ScalarMap[str, float]
    consistency: str
    round_id: str
    owners: _containers.RepeatedScalarFieldContainer[str]
    declined: _containers.ScalarMap[str, str]
    timings: ReportTimings
    def __init__(self, protocol: _Optional[str] = ..., mechanism: _Optional[str] = ..., epsilon: _Optional[float] = ..., column: _Optional[str] = ..., n: _Optional[int] = ..., engine: _Optional[str] = ..., estimates: _Optional[_Mapping[str, float]] = ..., std_errors: _Optional[_Mapping[str, float]] = ..., estimator: _Optional[str] = ..., consistent_estimates: _Optional[_Mapping[str, float]] = ..., consistency: _Optional[str] = ..., round_id: _Optional[str] = ..., owners: _Optional[_Iterable[str]] = ..., declined: _Optional[_Mapping[str, str]] = ..., timings: _Optional[_Union[ReportTimings, _Mapping]] = ...) -> None: ...

class LdpMeanResult(_message.Message):
    __slots__ = ("protocol", "mechanism", "epsilon", "column", "n", "engine", "mean", "std_error", "bounds", "estimator", "round_id", "owners", "declined", "timings")
    class DeclinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    MEAN_FIELD_NUMBER: _ClassVar[int]
    STD_ERROR_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    ESTIMATOR_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    protocol: str
    mechanism: str
    epsilon: float
    column: str
    n: int
    engine: str
    mean: float
    std_error: float
    bounds: _containers.RepeatedScalarFieldContainer[float]
    estimator: str
    round_id: str
    owners: _containers.RepeatedScalarFieldContainer[str]
    declined: _containers.ScalarMap[str, str]
    timings: ReportTimings
    def __init__(self, protocol: _Optional[str] = ..., mechanism: _Optional[str] = ..., epsilon: _Optional[float] = ..., column: _Optional[str] = ..., n: _Optional[int] = ..., engine: _Optional[str] = ..., mean: _Optional[float] = ..., std_error: _Optional[float] = ..., bounds: _Optional[_Iterable[float]] = ..., estimator: _Optional[str] = ..., round_id: _Optional[str] = ..., owners: _Optional[_Iterable[str]] = ..., declined: _Optional[_Mapping[str, str]] = ..., timings: _Optional[_Union[ReportTimings, _Mapping]] = ...) -> None: ...

class LdpMeansResult(_message.Message):
    __slots__ = ("protocol", "mechanism", "epsilon", "column", "n", "engine", "columns", "means", "std_errors", "bounds", "estimator", "round_id", "owners", "declined", "timings")
    class MeansEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class StdErrorsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class DeclinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    MEANS_FIELD_NUMBER: _ClassVar[int]
    STD_ERRORS_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    ESTIMATOR_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    protocol: str
    mechanism: str
    epsilon: float
    column: str
    n: int
    engine: str
    columns: _containers.RepeatedScalarFieldContainer[str]
    means: _containers.ScalarMap[str, float]
    std_errors: _containers.ScalarMap[str, float]
    bounds: _containers.RepeatedCompositeFieldContainer[Vector]
    estimator: str
    round_id: str
    owners: _containers.RepeatedScalarFieldContainer[str]
    declined: _containers.ScalarMap[str, str]
    timings: ReportTimings
    def __init__(self, protocol: _Optional[str] = ..., mechanism: _Optional[str] = ..., epsilon: _Optional[float] = ..., column: _Optional[str] = ..., n: _Optional[int] = ..., engine: _Optional[str] = ..., columns: _Optional[_Iterable[str]] = ..., means: _Optional[_Mapping[str, float]] = ..., std_errors: _Optional[_Mapping[str, float]] = ..., bounds: _Optional[_Iterable[_Union[Vector, _Mapping]]] = ..., estimator: _Optional[str] = ..., round_id: _Optional[str] = ..., owners: _Optional[_Iterable[str]] = ..., declined: _Optional[_Mapping[str, str]] = ..., timings: _Optional[_Union[ReportTimings, _Mapping]] = ...) -> None: ...

class LdpPointsResult(_message.Message):
    __slots__ = ("protocol", "mechanism", "epsilon", "column", "n", "columns", "box", "points", "estimator", "engine", "round_id", "owners", "declined", "timings", "box_fit", "mean", "std_errors", "bins", "bin_edges", "density_kind", "density")
    class DeclinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    BOX_FIELD_NUMBER: _ClassVar[int]
    POINTS_FIELD_NUMBER: _ClassVar[int]
    ESTIMATOR_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    BOX_FIT_FIELD_NUMBER: _ClassVar[int]
    MEAN_FIELD_NUMBER: _ClassVar[int]
    STD_ERRORS_FIELD_NUMBER: _ClassVar[int]
    BINS_FIELD_NUMBER: _ClassVar[int]
    BIN_EDGES_FIELD_NUMBER: _ClassVar[int]
    DENSITY_KIND_FIELD_NUMBER: _ClassVar[int]
    DENSITY_FIELD_NUMBER: _ClassVar[int]
    protocol: str
    mechanism: str
    epsilon: float
    column: str
    n: int
    columns: _containers.RepeatedScalarFieldContainer[str]
    box: _containers.RepeatedCompositeFieldContainer[Vector]
    points: _containers.RepeatedCompositeFieldContainer[Vector]
    estimator: str
    engine: str
    round_id: str
    owners: _containers.RepeatedScalarFieldContainer[str]
    declined: _containers.ScalarMap[str, str]
    timings: ReportTimings
    box_fit: str
    mean: _containers.RepeatedScalarFieldContainer[float]
    std_errors: _containers.RepeatedScalarFieldContainer[float]
    bins: int
    bin_edges: _containers.RepeatedCompositeFieldContainer[Vector]
    density_kind: str
    density: _containers.RepeatedCompositeFieldContainer[Vector]
    def __init__(self, protocol: _Optional[str] = ..., mechanism: _Optional[str] = ..., epsilon: _Optional[float] = ..., column: _Optional[str] = ..., n: _Optional[int] = ..., columns: _Optional[_Iterable[str]] = ..., box: _Optional[_Iterable[_Union[Vector, _Mapping]]] = ..., points: _Optional[_Iterable[_Union[Vector, _Mapping]]] = ..., estimator: _Optional[str] = ..., engine: _Optional[str] = ..., round_id: _Optional[str] = ..., owners: _Optional[_Iterable[str]] = ..., declined: _Optional[_Mapping[str, str]] = ..., timings: _Optional[_Union[ReportTimings, _Mapping]] = ..., box_fit: _Optional[str] = ..., mean: _Optional[_Iterable[float]] = ..., std_errors: _Optional[_Iterable[float]] = ..., bins: _Optional[int] = ..., bin_edges: _Optional[_Iterable[_Union[Vector, _Mapping]]] = ..., density_kind: _Optional[str] = ..., density: _Optional[_Iterable[_Union[Vector, _Mapping]]] = ...) -> None: ...

class LdpNaiveBayesResult(_message.Message):
    __slots__ = ("protocol", "mechanism", "epsilon", "column", "n", "engine", "estimator", "classes", "features", "priors", "conditionals", "report_counts", "round_id", "owners", "declined", "timings")
    class PriorsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class ConditionalsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: LdpConditional
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[LdpConditional, _Mapping]] = ...) -> None: ...
    class ReportCountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class DeclinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    ESTIMATOR_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    PRIORS_FIELD_NUMBER: _ClassVar[int]
    CONDITIONALS_FIELD_NUMBER: _ClassVar[int]
    REPORT_COUNTS_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    protocol: str
    mechanism: str
    epsilon: float
    column: str
    n: int
    engine: str
    estimator: str
    classes: _containers.RepeatedScalarFieldContainer[str]
    features: _containers.RepeatedScalarFieldContainer[str]
    priors: _containers.ScalarMap[str, float]
    conditionals: _containers.MessageMap[str, LdpConditional]
    report_counts: _containers.ScalarMap[str, int]
    round_id: str
    owners: _containers.RepeatedScalarFieldContainer[str]
    declined: _containers.ScalarMap[str, str]
    timings: ReportTimings
    def __init__(self, protocol: _Optional[str] = ..., mechanism: _Optional[str] = ..., epsilon: _Optional[float] = ..., column: _Optional[str] = ..., n: _Optional[int] = ..., engine: _Optional[str] = ..., estimator: _Optional[str] = ..., classes: _Optional[_Iterable[str]] = ..., features: _Optional[_Iterable[str]] = ..., priors: _Optional[_Mapping[str, float]] = ..., conditionals: _Optional[_Mapping[str, LdpConditional]] = ..., report_counts: _Optional[_Mapping[str, int]] = ..., round_id: _Optional[str] = ..., owners: _Optional[_Iterable[str]] = ..., declined: _Optional[_Mapping[str, str]] = ..., timings: _Optional[_Union[ReportTimings, _Mapping]] = ...) -> None: ...

class LdpConditional(_message.Message):
    __slots__ = ("values", "by_class")
    class ByClassEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Vector
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Vector, _Mapping]] = ...) -> None: ...
    VALUES_FIELD_NUMBER: _ClassVar[int]
    BY_CLASS_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    by_class: _containers.MessageMap[str, Vector]
    def __init__(self, values: _Optional[_Iterable[str]] = ..., by_class: _Optional[_Mapping[str, Vector]] = ...) -> None: ...

class WeightedStatsResult(_message.Message):
    __slots__ = ("protocol", "method", "features", "weight_column", "weight_bound", "n_rows", "total_weight", "means", "variances", "variance_definition", "round_id", "owners", "declined", "encoding", "timings", "dp")
    class MeansEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class VariancesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class DeclinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_COLUMN_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_BOUND_FIELD_NUMBER: _ClassVar[int]
    N_ROWS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    MEANS_FIELD_NUMBER: _ClassVar[int]
    VARIANCES_FIELD_NUMBER: _ClassVar[int]
    VARIANCE_DEFINITION_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    DP_FIELD_NUMBER: _ClassVar[int]
    protocol: str
    method: str
    features: _containers.RepeatedScalarFieldContainer[str]
    weight_column: str
    weight_bound: float
    n_rows: int
    total_weight: float
    means: _containers.ScalarMap[str, float]
    variances: _containers.ScalarMap[str, float]
    variance_definition: str
    round_id: str
    owners: _containers.RepeatedScalarFieldContainer[str]
    declined: _containers.ScalarMap[str, str]
    encoding: EncodingFacts
    timings: RoundTimings
    dp: DpFacts
    def __init__(self, protocol: _Optional[str] = ..., method: _Optional[str] = ..., features: _Optional[_Iterable[str]] = ..., weight_column: _Optional[str] = ..., weight_bound: _Optional[float] = ..., n_rows: _Optional[int] = ..., total_weight: _Optional[float] = ..., means: _Optional[_Mapping[str, float]] = ..., variances: _Optional[_Mapping[str, float]] = ..., variance_definition: _Optional[str] = ..., round_id: _Optional[str] = ..., owners: _Optional[_Iterable[str]] = ..., declined: _Optional[_Mapping[str, str]] = ..., encoding: _Optional[_Union[EncodingFacts, _Mapping]] = ..., timings: _Optional[_Union[RoundTimings, _Mapping]] = ..., dp: _Optional[_Union[DpFacts, _Mapping]] = ...) -> None: ...

class LinregResult(_message.Message):
    __slots__ = ("protocol", "method", "features", "label_column", "ridge", "n_rows", "df_residual", "terms", "coefficients", "std_errors", "t_statistics", "p_values", "ci_level", "ci_lower", "ci_upper", "r_squared", "adj_r_squared", "residual_std_error", "label_bound", "noise_std_errors", "round_id", "owners", "declined", "encoding", "timings", "dp")
    class CoefficientsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class StdErrorsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class TStatisticsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class PValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class CiLowerEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class CiUpperEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class NoiseStdErrorsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class DeclinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    LABEL_COLUMN_FIELD_NUMBER: _ClassVar[int]
    RIDGE_FIELD_NUMBER: _ClassVar[int]
    N_ROWS_FIELD_NUMBER: _ClassVar[int]
    DF_RESIDUAL_FIELD_NUMBER: _ClassVar[int]
    TERMS_FIELD_NUMBER: _ClassVar[int]
    COEFFICIENTS_FIELD_NUMBER: _ClassVar[int]
    STD_ERRORS_FIELD_NUMBER: _ClassVar[int]
    T_STATISTICS_FIELD_NUMBER: _ClassVar[int]
    P_VALUES_FIELD_NUMBER: _ClassVar[int]
    CI_LEVEL_FIELD_NUMBER: _ClassVar[int]
    CI_LOWER_FIELD_NUMBER: _ClassVar[int]
    CI_UPPER_FIELD_NUMBER: _ClassVar[int]
    R_SQUARED_FIELD_NUMBER: _ClassVar[int]
    ADJ_R_SQUARED_FIELD_NUMBER: _ClassVar[int]
    RESIDUAL_STD_ERROR_FIELD_NUMBER: _ClassVar[int]
    LABEL_BOUND_FIELD_NUMBER: _ClassVar[int]
    NOISE_STD_ERRORS_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    DP_FIELD_NUMBER: _ClassVar[int]
    protocol: str
    method: str
    features: _containers.RepeatedScalarFieldContainer[str]
    label_column: str
    ridge: float
    n_rows: int
    df_residual: int
    terms: _containers.RepeatedScalarFieldContainer[str]
    coefficients: _containers.ScalarMap[str, float]
    std_errors: _containers.ScalarMap[str, float]
    t_statistics: _containers.ScalarMap[str, float]
    p_values: _containers.ScalarMap[str, float]
    ci_level: float
    ci_lower: _containers.ScalarMap[str, float]
    ci_upper: _containers.ScalarMap[str, float]
    r_squared: float
    adj_r_squared: float
    residual_std_error: float
    label_bound: float
    noise_std_errors: _containers.ScalarMap[str, float]
    round_id: str
    owners: _containers.RepeatedScalarFieldContainer[str]
    declined: _containers.ScalarMap[str, str]
    encoding: EncodingFacts
    timings: RoundTimings
    dp: DpFacts
    def __init__(self, protocol: _Optional[str] = ..., method: _Optional[str] = ..., features: _Optional[_Iterable[str]] = ..., label_column: _Optional[str] = ..., ridge: _Optional[float] = ..., n_rows: _Optional[int] = ..., df_residual: _Optional[int] = ..., terms: _Optional[_Iterable[str]] = ..., coefficients: _Optional[_Mapping[str, float]] = ..., std_errors: _Optional[_Mapping[str, float]] = ..., t_statistics: _Optional[_Mapping[str, float]] = ..., p_values: _Optional[_Mapping[str, float]] = ..., ci_level: _Optional[float] = ..., ci_lower: _Optional[_Mapping[str, float]] = ..., ci_upper: _Optional[_Mapping[str, float]] = ..., r_squared: _Optional[float] = ..., adj_r_squared: _Optional[float] = ..., residual_std_error: _Optional[float] = ..., label_bound: _Optional[float] = ..., noise_std_errors: _Optional[_Mapping[str, float]] = ..., round_id: _Optional[str] = ..., owners: _Optional[_Iterable[str]] = ..., declined: _Optional[_Mapping[str, str]] = ..., encoding: _Optional[_Union[EncodingFacts, _Mapping]] = ..., timings: _Optional[_Union[RoundTimings, _Mapping]] = ..., dp: _Optional[_Union[DpFacts, _Mapping]] = ...) -> None: ...

class CrosstabLabels(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...

class CrosstabCounts(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, values: _Optional[_Iterable[int]] = ...) -> None: ...

class CrosstabResult(_message.Message):
    __slots__ = ("protocol", "method", "columns", "categories", "edges", "counts", "margins", "n", "cells", "bins", "outside", "round_id", "owners", "declined", "encoding", "timings", "dp")
    class CategoriesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: CrosstabLabels
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[CrosstabLabels, _Mapping]] = ...) -> None: ...
    class EdgesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Vector
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Vector, _Mapping]] = ...) -> None: ...
    class MarginsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: CrosstabCounts
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[CrosstabCounts, _Mapping]] = ...) -> None: ...
    class DeclinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    MARGINS_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    CELLS_FIELD_NUMBER: _ClassVar[int]
    BINS_FIELD_NUMBER: _ClassVar[int]
    OUTSIDE_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    DP_FIELD_NUMBER: _ClassVar[int]
    protocol: str
    method: str
    columns: _containers.RepeatedScalarFieldContainer[str]
    categories: _containers.MessageMap[str, CrosstabLabels]
    edges: _containers.MessageMap[str, Vector]
    counts: _containers.RepeatedCompositeFieldContainer[CrosstabCounts]
    margins: _containers.MessageMap[str, CrosstabCounts]
    n: int
    cells: int
    bins: str
    outside: str
    round_id: str
    owners: _containers.RepeatedScalarFieldContainer[str]
    declined: _containers.ScalarMap[str, str]
    encoding: EncodingFacts
    timings: RoundTimings
    dp: DpFacts
    def __init__(self, protocol: _Optional[str] = ..., method: _Optional[str] = ..., columns: _Optional[_Iterable[str]] = ..., categories: _Optional[_Mapping[str, CrosstabLabels]] = ..., edges: _Optional[_Mapping[str, Vector]] = ..., counts: _Optional[_Iterable[_Union[CrosstabCounts, _Mapping]]] = ..., margins: _Optional[_Mapping[str, CrosstabCounts]] = ..., n: _Optional[int] = ..., cells: _Optional[int] = ..., bins: _Optional[str] = ..., outside: _Optional[str] = ..., round_id: _Optional[str] = ..., owners: _Optional[_Iterable[str]] = ..., declined: _Optional[_Mapping[str, str]] = ..., encoding: _Optional[_Union[EncodingFacts, _Mapping]] = ..., timings: _Optional[_Union[RoundTimings, _Mapping]] = ..., dp: _Optional[_Union[DpFacts, _Mapping]] = ...) -> None: ...

class QuantilesResult(_message.Message):
    __slots__ = ("protocol", "method", "features", "lower", "upper", "bins", "bin_width", "percentiles", "quantiles", "rank_error", "histogram", "n", "interpolation", "outside", "round_id", "owners", "declined", "encoding", "timings", "dp")
    class QuantilesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Vector
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Vector, _Mapping]] = ...) -> None: ...
    class RankErrorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Vector
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Vector, _Mapping]] = ...) -> None: ...
    class HistogramEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Vector
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Vector, _Mapping]] = ...) -> None: ...
    class NEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class DeclinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    LOWER_FIELD_NUMBER: _ClassVar[int]
    UPPER_FIELD_NUMBER: _ClassVar[int]
    BINS_FIELD_NUMBER: _ClassVar[int]
    BIN_WIDTH_FIELD_NUMBER: _ClassVar[int]
    PERCENTILES_FIELD_NUMBER: _ClassVar[int]
    QUANTILES_FIELD_NUMBER: _ClassVar[int]
    RANK_ERROR_FIELD_NUMBER: _ClassVar[int]
    HISTOGRAM_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    INTERPOLATION_FIELD_NUMBER: _ClassVar[int]
    OUTSIDE_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    DP_FIELD_NUMBER: _ClassVar[int]
    protocol: str
    method: str
    features: _containers.RepeatedScalarFieldContainer[str]
    lower: float
    upper: float
    bins: int
    bin_width: float
    percentiles: _containers.RepeatedScalarFieldContainer[float]
    quantiles: _containers.MessageMap[str, Vector]
    rank_error: _containers.MessageMap[str, Vector]
    histogram: _containers.MessageMap[str, Vector]
    n: _containers.ScalarMap[str, float]
    interpolation: str
    outside: str
    round_id: str
    owners: _containers.RepeatedScalarFieldContainer[str]
    declined: _containers.ScalarMap[str, str]
    encoding: EncodingFacts
    timings: RoundTimings
    dp: DpFacts
    def __init__(self, protocol: _Optional[str] = ..., method: _Optional[str] = ..., features: _Optional[_Iterable[str]] = ..., lower: _Optional[float] = ..., upper: _Optional[float] = ..., bins: _Optional[int] = ..., bin_width: _Optional[float] = ..., percentiles: _Optional[_Iterable[float]] = ..., quantiles: _Optional[_Mapping[str, Vector]] = ..., rank_error: _Optional[_Mapping[str, Vector]] = ..., histogram: _Optional[_Mapping[str, Vector]] = ..., n: _Optional[_Mapping[str, float]] = ..., interpolation: _Optional[str] = ..., outside: _Optional[str] = ..., round_id: _Optional[str] = ..., owners: _Optional[_Iterable[str]] = ..., declined: _Optional[_Mapping[str, str]] = ..., encoding: _Optional[_Union[EncodingFacts, _Mapping]] = ..., timings: _Optional[_Union[RoundTimings, _Mapping]] = ..., dp: _Optional[_Union[DpFacts, _Mapping]] = ...) -> None: ...

class LogregIterationSummary(_message.Message):
    __slots__ = ("iteration", "round_id", "owners", "coefficients", "max_step", "max_abs_gradient", "seconds")
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    COEFFICIENTS_FIELD_NUMBER: _ClassVar[int]
    MAX_STEP_FIELD_NUMBER: _ClassVar[int]
    MAX_ABS_GRADIENT_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    iteration: int
    round_id: str
    owners: _containers.RepeatedScalarFieldContainer[str]
    coefficients: _containers.RepeatedScalarFieldContainer[float]
    max_step: float
    max_abs_gradient: float
    seconds: float
    def __init__(self, iteration: _Optional[int] = ..., round_id: _Optional[str] = ..., owners: _Optional[_Iterable[str]] = ..., coefficients: _Optional[_Iterable[float]] = ..., max_step: _Optional[float] = ..., max_abs_gradient: _Optional[float] = ..., seconds: _Optional[float] = ...) -> None: ...

class LogregDpFacts(_message.Message):
    __slots__ = ("mechanism", "epsilon", "delta", "row_norm_bound", "quorum", "sensitivity_l1", "sensitivity_l2", "composition", "iterations_budgeted", "epsilon_per_iteration", "delta_per_iteration", "epsilon_spent", "delta_spent", "skellam_mu_per_iteration", "noise_std_per_value", "post_processing", "note", "accountant", "bounds", "clipped_rows", "figures", "figure_noise_std", "warnings")
    class FiguresEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class FigureNoiseStdEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    ROW_NORM_BOUND_FIELD_NUMBER: _ClassVar[int]
    QUORUM_FIELD_NUMBER: _ClassVar[int]
    SENSITIVITY_L1_FIELD_NUMBER: _ClassVar[int]
    SENSITIVITY_L2_FIELD_NUMBER: _ClassVar[int]
    COMPOSITION_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_BUDGETED_FIELD_NUMBER: _ClassVar[int]
    EPSILON_PER_ITERATION_FIELD_NUMBER: _ClassVar[int]
    DELTA_PER_ITERATION_FIELD_NUMBER: _ClassVar[int]
    EPSILON_SPENT_FIELD_NUMBER: _ClassVar[int]
    DELTA_SPENT_FIELD_NUMBER: _ClassVar[int]
    SKELLAM_MU_PER_ITERATION_FIELD_NUMBER: _ClassVar[int]
    NOISE_STD_PER_VALUE_FIELD_NUMBER: _ClassVar[int]
    POST_PROCESSING_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    ACCOUNTANT_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    CLIPPED_ROWS_FIELD_NUMBER: _ClassVar[int]
    FIGURES_FIELD_NUMBER: _ClassVar[int]
    FIGURE_NOISE_STD_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    mechanism: str
    epsilon: float
    delta: float
    row_norm_bound: float
    quorum: int
    sensitivity_l1: float
    sensitivity_l2: float
    composition: str
    iterations_budgeted: int
    epsilon_per_iteration: float
    delta_per_iteration: float
    epsilon_spent: float
    delta_spent: float
    skellam_mu_per_iteration: float
    noise_std_per_value: float
    post_processing: str
    note: str
    accountant: str
    bounds: _containers.RepeatedCompositeFieldContainer[ColumnBounds]
    clipped_rows: float
    figures: _containers.ScalarMap[str, float]
    figure_noise_std: _containers.ScalarMap[str, float]
    warnings: _containers.RepeatedCompositeFieldContainer[ReleaseWarning]
    def __init__(self, mechanism: _Optional[str] = ..., epsilon: _Optional[float] = ..., delta: _Optional[float] = ..., row_norm_bound: _Optional[float] = ..., quorum: _Optional[int] = ..., sensitivity_l1: _Optional[float] = ..., sensitivity_l2: _Optional[float] = ..., composition: _Optional[str] = ..., iterations_budgeted: _Optional[int] = ..., epsilon_per_iteration: _Optional[float] = ..., delta_per_iteration: _Optional[float] = ..., epsilon_spent: _Optional[float] = ..., delta_spent: _Optional[float] = ..., skellam_mu_per_iteration: _Optional[float] = ..., noise_std_per_value: _Optional[float] = ..., post_processing: _Optional[str] = ..., note: _Optional[str] = ..., accountant: _Optional[str] = ..., bounds: _Optional[_Iterable[_Union[ColumnBounds, _Mapping]]] = ..., clipped_rows: _Optional[float] = ..., figures: _Optional[_Mapping[str, float]] = ..., figure_noise_std: _Optional[_Mapping[str, float]] = ..., warnings: _Optional[_Iterable[_Union[ReleaseWarning, _Mapping]]] = ...) -> None: ...

class LogregResult(_message.Message):
    __slots__ = ("protocol", "method", "job_id", "features", "label_column", "positive_class", "n_rows", "n_positive", "terms", "coefficients", "std_errors", "z_statistics", "p_values", "ci_level", "ci_lower", "ci_upper", "iterations_run", "max_iterations", "tolerance", "converged", "coefficient_bound", "noise_std_errors", "iterations", "round_id", "owners", "declined", "encoding", "timings", "dp")
    class CoefficientsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class StdErrorsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class ZStatisticsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class PValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class CiLowerEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class CiUpperEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class NoiseStdErrorsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class DeclinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    LABEL_COLUMN_FIELD_NUMBER: _ClassVar[int]
    POSITIVE_CLASS_FIELD_NUMBER: _ClassVar[int]
    N_ROWS_FIELD_NUMBER: _ClassVar[int]
    N_POSITIVE_FIELD_NUMBER: _ClassVar[int]
    TERMS_FIELD_NUMBER: _ClassVar[int]
    COEFFICIENTS_FIELD_NUMBER: _ClassVar[int]
    STD_ERRORS_FIELD_NUMBER: _ClassVar[int]
    Z_STATISTICS_FIELD_NUMBER: _ClassVar[int]
    P_VALUES_FIELD_NUMBER: _ClassVar[int]
    CI_LEVEL_FIELD_NUMBER: _ClassVar[int]
    CI_LOWER_FIELD_NUMBER: _ClassVar[int]
    CI_UPPER_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_RUN_FIELD_NUMBER: _ClassVar[int]
    MAX_ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    TOLERANCE_FIELD_NUMBER: _ClassVar[int]
    CONVERGED_FIELD_NUMBER: _ClassVar[int]
    COEFFICIENT_BOUND_FIELD_NUMBER: _ClassVar[int]
    NOISE_STD_ERRORS_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    DP_FIELD_NUMBER: _ClassVar[int]
    protocol: str
    method: str
    job_id: str
    features: _containers.RepeatedScalarFieldContainer[str]
    label_column: str
    positive_class: str
    n_rows: int
    n_positive: int
    terms: _containers.RepeatedScalarFieldContainer[str]
    coefficients: _containers.ScalarMap[str, float]
    std_errors: _containers.ScalarMap[str, float]
    z_statistics: _containers.ScalarMap[str, float]
    p_values: _containers.ScalarMap[str, float]
    ci_level: float
    ci_lower: _containers.ScalarMap[str, float]
    ci_upper: _containers.ScalarMap[str, float]
    iterations_run: int
    max_iterations: int
    tolerance: float
    converged: bool
    coefficient_bound: float
    noise_std_errors: _containers.ScalarMap[str, float]
    iterations: _containers.RepeatedCompositeFieldContainer[LogregIterationSummary]
    round_id: str
    owners: _containers.RepeatedScalarFieldContainer[str]
    declined: _containers.ScalarMap[str, str]
    encoding: EncodingFacts
    timings: RoundTimings
    dp: LogregDpFacts
    def __init__(self, protocol: _Optional[str] = ..., method: _Optional[str] = ..., job_id: _Optional[str] = ..., features: _Optional[_Iterable[str]] = ..., label_column: _Optional[str] = ..., positive_class: _Optional[str] = ..., n_rows: _Optional[int] = ..., n_positive: _Optional[int] = ..., terms: _Optional[_Iterable[str]] = ..., coefficients: _Optional[_Mapping[str, float]] = ..., std_errors: _Optional[_Mapping[str, float]] = ..., z_statistics: _Optional[_Mapping[str, float]] = ..., p_values: _Optional[_Mapping[str, float]] = ..., ci_level: _Optional[float] = ..., ci_lower: _Optional[_Mapping[str, float]] = ..., ci_upper: _Optional[_Mapping[str, float]] = ..., iterations_run: _Optional[int] = ..., max_iterations: _Optional[int] = ..., tolerance: _Optional[float] = ..., converged: _Optional[bool] = ..., coefficient_bound: _Optional[float] = ..., noise_std_errors: _Optional[_Mapping[str, float]] = ..., iterations: _Optional[_Iterable[_Union[LogregIterationSummary, _Mapping]]] = ..., round_id: _Optional[str] = ..., owners: _Optional[_Iterable[str]] = ..., declined: _Optional[_Mapping[str, str]] = ..., encoding: _Optional[_Union[EncodingFacts, _Mapping]] = ..., timings: _Optional[_Union[RoundTimings, _Mapping]] = ..., dp: _Optional[_Union[LogregDpFacts, _Mapping]] = ...) -> None: ...

class NaiveBayesCategorical(_message.Message):
    __slots__ = ("feature", "categories", "counts", "log_prob")
    FEATURE_FIELD_NUMBER: _ClassVar[int]
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    LOG_PROB_FIELD_NUMBER: _ClassVar[int]
    feature: str
    categories: _containers.RepeatedScalarFieldContainer[str]
    counts: _containers.RepeatedCompositeFieldContainer[Vector]
    log_prob: _containers.RepeatedCompositeFieldContainer[Vector]
    def __init__(self, feature: _Optional[str] = ..., categories: _Optional[_Iterable[str]] = ..., counts: _Optional[_Iterable[_Union[Vector, _Mapping]]] = ..., log_prob: _Optional[_Iterable[_Union[Vector, _Mapping]]] = ...) -> None: ...

class NaiveBayesResult(_message.Message):
    __slots__ = ("protocol", "method", "label_column", "classes", "numeric_features", "categorical", "class_count", "class_prior", "theta", "var", "var_smoothing", "epsilon", "alpha", "n", "bounds", "floored", "outside", "round_id", "owners", "declined", "encoding", "timings", "dp")
    class ThetaEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Vector
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Vector, _Mapping]] = ...) -> None: ...
    class VarEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Vector
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Vector, _Mapping]] = ...) -> None: ...
    class BoundsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Vector
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Vector, _Mapping]] = ...) -> None: ...
    class DeclinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    LABEL_COLUMN_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    NUMERIC_FEATURES_FIELD_NUMBER: _ClassVar[int]
    CATEGORICAL_FIELD_NUMBER: _ClassVar[int]
    CLASS_COUNT_FIELD_NUMBER: _ClassVar[int]
    CLASS_PRIOR_FIELD_NUMBER: _ClassVar[int]
    THETA_FIELD_NUMBER: _ClassVar[int]
    VAR_FIELD_NUMBER: _ClassVar[int]
    VAR_SMOOTHING_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    FLOORED_FIELD_NUMBER: _ClassVar[int]
    OUTSIDE_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    DP_FIELD_NUMBER: _ClassVar[int]
    protocol: str
    method: str
    label_column: str
    classes: _containers.RepeatedScalarFieldContainer[str]
    numeric_features: _containers.RepeatedScalarFieldContainer[str]
    categorical: _containers.RepeatedCompositeFieldContainer[NaiveBayesCategorical]
    class_count: _containers.RepeatedScalarFieldContainer[float]
    class_prior: _containers.RepeatedScalarFieldContainer[float]
    theta: _containers.MessageMap[str, Vector]
    var: _containers.MessageMap[str, Vector]
    var_smoothing: float
    epsilon: float
    alpha: float
    n: float
    bounds: _containers.MessageMap[str, Vector]
    floored: int
    outside: str
    round_id: str
    owners: _containers.RepeatedScalarFieldContainer[str]
    declined: _containers.ScalarMap[str, str]
    encoding: EncodingFacts
    timings: RoundTimings
    dp: DpFacts
    def __init__(self, protocol: _Optional[str] = ..., method: _Optional[str] = ..., label_column: _Optional[str] = ..., classes: _Optional[_Iterable[str]] = ..., numeric_features: _Optional[_Iterable[str]] = ..., categorical: _Optional[_Iterable[_Union[NaiveBayesCategorical, _Mapping]]] = ..., class_count: _Optional[_Iterable[float]] = ..., class_prior: _Optional[_Iterable[float]] = ..., theta: _Optional[_Mapping[str, Vector]] = ..., var: _Optional[_Mapping[str, Vector]] = ..., var_smoothing: _Optional[float] = ..., epsilon: _Optional[float] = ..., alpha: _Optional[float] = ..., n: _Optional[float] = ..., bounds: _Optional[_Mapping[str, Vector]] = ..., floored: _Optional[int] = ..., outside: _Optional[str] = ..., round_id: _Optional[str] = ..., owners: _Optional[_Iterable[str]] = ..., declined: _Optional[_Mapping[str, str]] = ..., encoding: _Optional[_Union[EncodingFacts, _Mapping]] = ..., timings: _Optional[_Union[RoundTimings, _Mapping]] = ..., dp: _Optional[_Union[DpFacts, _Mapping]] = ...) -> None: ...

class CorrelationResult(_message.Message):
    __slots__ = ("protocol", "method", "features", "n_rows", "correlation", "ci_lower", "ci_upper", "confidence", "interval", "round_id", "owners", "declined", "encoding", "timings", "dp")
    class DeclinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    N_ROWS_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_FIELD_NUMBER: _ClassVar[int]
    CI_LOWER_FIELD_NUMBER: _ClassVar[int]
    CI_UPPER_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    DP_FIELD_NUMBER: _ClassVar[int]
    protocol: str
    method: str
    features: _containers.RepeatedScalarFieldContainer[str]
    n_rows: int
    correlation: _containers.RepeatedCompositeFieldContainer[Vector]
    ci_lower: _containers.RepeatedCompositeFieldContainer[Vector]
    ci_upper: _containers.RepeatedCompositeFieldContainer[Vector]
    confidence: float
    interval: str
    round_id: str
    owners: _containers.RepeatedScalarFieldContainer[str]
    declined: _containers.ScalarMap[str, str]
    encoding: EncodingFacts
    timings: RoundTimings
    dp: DpFacts
    def __init__(self, protocol: _Optional[str] = ..., method: _Optional[str] = ..., features: _Optional[_Iterable[str]] = ..., n_rows: _Optional[int] = ..., correlation: _Optional[_Iterable[_Union[Vector, _Mapping]]] = ..., ci_lower: _Optional[_Iterable[_Union[Vector, _Mapping]]] = ..., ci_upper: _Optional[_Iterable[_Union[Vector, _Mapping]]] = ..., confidence: _Optional[float] = ..., interval: _Optional[str] = ..., round_id: _Optional[str] = ..., owners: _Optional[_Iterable[str]] = ..., declined: _Optional[_Mapping[str, str]] = ..., encoding: _Optional[_Union[EncodingFacts, _Mapping]] = ..., timings: _Optional[_Union[RoundTimings, _Mapping]] = ..., dp: _Optional[_Union[DpFacts, _Mapping]] = ...) -> None: ...

class StatisticResult(_message.Message):
    __slots__ = ("protocol", "version", "values_json", "figures", "round_id", "owners", "declined", "encoding", "timings", "dp")
    class FiguresEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class DeclinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    VALUES_JSON_FIELD_NUMBER: _ClassVar[int]
    FIGURES_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    DP_FIELD_NUMBER: _ClassVar[int]
    protocol: str
    version: str
    values_json: str
    figures: _containers.ScalarMap[str, float]
    round_id: str
    owners: _containers.RepeatedScalarFieldContainer[str]
    declined: _containers.ScalarMap[str, str]
    encoding: EncodingFacts
    timings: RoundTimings
    dp: DpFacts
    def __init__(self, protocol: _Optional[str] = ..., version: _Optional[str] = ..., values_json: _Optional[str] = ..., figures: _Optional[_Mapping[str, float]] = ..., round_id: _Optional[str] = ..., owners: _Optional[_Iterable[str]] = ..., declined: _Optional[_Mapping[str, str]] = ..., encoding: _Optional[_Union[EncodingFacts, _Mapping]] = ..., timings: _Optional[_Union[RoundTimings, _Mapping]] = ..., dp: _Optional[_Union[DpFacts, _Mapping]] = ...) -> None: ...

class RoundResult(_message.Message):
    __slots__ = ("pca", "discriminant", "projection_only", "kmeans_iteration", "kmeans_job", "ldp_frequency", "ldp_mean", "ldp_means", "ldp_points", "weighted_stats", "linreg", "crosstab", "quantiles", "logreg", "naive_bayes", "ldp_naive_bayes", "correlation", "statistic")
    PCA_FIELD_NUMBER: _ClassVar[int]
    DISCRIMINANT_FIELD_NUMBER: _ClassVar[int]
    PROJECTION_ONLY_FIELD_NUMBER: _ClassVar[int]
    KMEANS_ITERATION_FIELD_NUMBER: _ClassVar[int]
    KMEANS_JOB_FIELD_NUMBER: _ClassVar[int]
    LDP_FREQUENCY_FIELD_NUMBER: _ClassVar[int]
    LDP_MEAN_FIELD_NUMBER: _ClassVar[int]
    LDP_MEANS_FIELD_NUMBER: _ClassVar[int]
    LDP_POINTS_FIELD_NUMBER: _ClassVar[int]
    WEIGHTED_STATS_FIELD_NUMBER: _ClassVar[int]
    LINREG_FIELD_NUMBER: _ClassVar[int]
    CROSSTAB_FIELD_NUMBER: _ClassVar[int]
    QUANTILES_FIELD_NUMBER: _ClassVar[int]
    LOGREG_FIELD_NUMBER: _ClassVar[int]
    NAIVE_BAYES_FIELD_NUMBER: _ClassVar[int]
    LDP_NAIVE_BAYES_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_FIELD_NUMBER: _ClassVar[int]
    STATISTIC_FIELD_NUMBER: _ClassVar[int]
    pca: PcaResult
    discriminant: DiscriminantResult
    projection_only: ProjectionOnlyResult
    kmeans_iteration: KmeansIterationResult
    kmeans_job: KmeansJobResult
    ldp_frequency: LdpFrequencyResult
    ldp_mean: LdpMeanResult
    ldp_means: LdpMeansResult
    ldp_points: LdpPointsResult
    weighted_stats: WeightedStatsResult
    linreg: LinregResult
    crosstab: CrosstabResult
    quantiles: QuantilesResult
    logreg: LogregResult
    naive_bayes: NaiveBayesResult
    ldp_naive_bayes: LdpNaiveBayesResult
    correlation: CorrelationResult
    statistic: StatisticResult
    def __init__(self, pca: _Optional[_Union[PcaResult, _Mapping]] = ..., discriminant: _Optional[_Union[DiscriminantResult, _Mapping]] = ..., projection_only: _Optional[_Union[ProjectionOnlyResult, _Mapping]] = ..., kmeans_iteration: _Optional[_Union[KmeansIterationResult, _Mapping]] = ..., kmeans_job: _Optional[_Union[KmeansJobResult, _Mapping]] = ..., ldp_frequency: _Optional[_Union[LdpFrequencyResult, _Mapping]] = ..., ldp_mean: _Optional[_Union[LdpMeanResult, _Mapping]] = ..., ldp_means: _Optional[_Union[LdpMeansResult, _Mapping]] = ..., ldp_points: _Optional[_Union[LdpPointsResult, _Mapping]] = ..., weighted_stats: _Optional[_Union[WeightedStatsResult, _Mapping]] = ..., linreg: _Optional[_Union[LinregResult, _Mapping]] = ..., crosstab: _Optional[_Union[CrosstabResult, _Mapping]] = ..., quantiles: _Optional[_Union[QuantilesResult, _Mapping]] = ..., logreg: _Optional[_Union[LogregResult, _Mapping]] = ..., naive_bayes: _Optional[_Union[NaiveBayesResult, _Mapping]] = ..., ldp_naive_bayes: _Optional[_Union[LdpNaiveBayesResult, _Mapping]] = ..., correlation: _Optional[_Union[CorrelationResult, _Mapping]] = ..., statistic: _Optional[_Union[StatisticResult, _Mapping]] = ...) -> None: ...

class RoundQuery(_message.Message):
    __slots__ = ("round_id", "wait_seconds")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    wait_seconds: float
    def __init__(self, round_id: _Optional[str] = ..., wait_seconds: _Optional[float] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: int
    def __init__(self, limit: _Optional[int] = ...) -> None: ...

class JobSummary(_message.Message):
    __slots__ = ("job_id", "protocol", "analyst", "state", "message", "started_unix", "invited", "submitted")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    ANALYST_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STARTED_UNIX_FIELD_NUMBER: _ClassVar[int]
    INVITED_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    protocol: str
    analyst: str
    state: str
    message: str
    started_unix: float
    invited: _containers.RepeatedScalarFieldContainer[str]
    submitted: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, job_id: _Optional[str] = ..., protocol: _Optional[str] = ..., analyst: _Optional[str] = ..., state: _Optional[str] = ..., message: _Optional[str] = ..., started_unix: _Optional[float] = ..., invited: _Optional[_Iterable[str]] = ..., submitted: _Optional[_Iterable[str]] = ...) -> None: ...

class JobList(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[JobSummary]
    def __init__(self, jobs: _Optional[_Iterable[_Union[JobSummary, _Mapping]]] = ...) -> None: ...

class RoundStatus(_message.Message):
    __slots__ = ("round_id", "protocol", "state", "message", "invited", "submitted", "missing", "result", "progress", "published", "included", "n_invited", "n_submitted")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    INVITED_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_FIELD_NUMBER: _ClassVar[int]
    INCLUDED_FIELD_NUMBER: _ClassVar[int]
    N_INVITED_FIELD_NUMBER: _ClassVar[int]
    N_SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    protocol: str
    state: str
    message: str
    invited: _containers.RepeatedScalarFieldContainer[str]
    submitted: _containers.RepeatedScalarFieldContainer[str]
    missing: _containers.RepeatedScalarFieldContainer[str]
    result: RoundResult
    progress: JobProgress
    published: bool
    included: bool
    n_invited: int
    n_submitted: int
    def __init__(self, round_id: _Optional[str] = ..., protocol: _Optional[str] = ..., state: _Optional[str] = ..., message: _Optional[str] = ..., invited: _Optional[_Iterable[str]] = ..., submitted: _Optional[_Iterable[str]] = ..., missing: _Optional[_Iterable[str]] = ..., result: _Optional[_Union[RoundResult, _Mapping]] = ..., progress: _Optional[_Union[JobProgress, _Mapping]] = ..., published: _Optional[bool] = ..., included: _Optional[bool] = ..., n_invited: _Optional[int] = ..., n_submitted: _Optional[int] = ...) -> None: ...

class JobProgress(_message.Message):
    __slots__ = ("round_id", "round", "rounds", "phase", "invited", "accepted", "declined", "submitted", "quorum", "elapsed_seconds", "previous")
    class DeclinedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    INVITED_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    QUORUM_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    round: int
    rounds: int
    phase: str
    invited: _containers.RepeatedScalarFieldContainer[str]
    accepted: _containers.RepeatedScalarFieldContainer[str]
    declined: _containers.ScalarMap[str, str]
    submitted: _containers.RepeatedScalarFieldContainer[str]
    quorum: int
    elapsed_seconds: float
    previous: str
    def __init__(self, round_id: _Optional[str] = ..., round: _Optional[int] = ..., rounds: _Optional[int] = ..., phase: _Optional[str] = ..., invited: _Optional[_Iterable[str]] = ..., accepted: _Optional[_Iterable[str]] = ..., declined: _Optional[_Mapping[str, str]] = ..., submitted: _Optional[_Iterable[str]] = ..., quorum: _Optional[int] = ..., elapsed_seconds: _Optional[float] = ..., previous: _Optional[str] = ...) -> None: ...

class CspRoundRequest(_message.Message):
    __slots__ = ("round_id", "key_id", "n_ciphertexts", "mode", "invited")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    N_CIPHERTEXTS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    INVITED_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    key_id: str
    n_ciphertexts: int
    mode: str
    invited: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, round_id: _Optional[str] = ..., key_id: _Optional[str] = ..., n_ciphertexts: _Optional[int] = ..., mode: _Optional[str] = ..., invited: _Optional[_Iterable[str]] = ...) -> None: ...

class DecryptChunk(_message.Message):
    __slots__ = ("header", "batch", "share")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    header: CspRoundRequest
    batch: CiphertextBatch
    share: Signed
    def __init__(self, header: _Optional[_Union[CspRoundRequest, _Mapping]] = ..., batch: _Optional[_Union[CiphertextBatch, _Mapping]] = ..., share: _Optional[_Union[Signed, _Mapping]] = ...) -> None: ...

class PartialDecryptionBatch(_message.Message):
    __slots__ = ("partials", "index", "proof_challenge", "proof_response", "sum_digest", "partial_seconds", "prove_seconds", "verify_seconds", "sum_seconds", "contributors")
    PARTIALS_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    PROOF_CHALLENGE_FIELD_NUMBER: _ClassVar[int]
    PROOF_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    SUM_DIGEST_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PROVE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    VERIFY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SUM_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CONTRIBUTORS_FIELD_NUMBER: _ClassVar[int]
    partials: _containers.RepeatedScalarFieldContainer[bytes]
    index: int
    proof_challenge: bytes
    proof_response: bytes
    sum_digest: bytes
    partial_seconds: float
    prove_seconds: float
    verify_seconds: float
    sum_seconds: float
    contributors: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, partials: _Optional[_Iterable[bytes]] = ..., index: _Optional[int] = ..., proof_challenge: _Optional[bytes] = ..., proof_response: _Optional[bytes] = ..., sum_digest: _Optional[bytes] = ..., partial_seconds: _Optional[float] = ..., prove_seconds: _Optional[float] = ..., verify_seconds: _Optional[float] = ..., sum_seconds: _Optional[float] = ..., contributors: _Optional[_Iterable[str]] = ...) -> None: ...

class PlaintextBatch(_message.Message):
    __slots__ = ("plaintexts", "decrypt_seconds", "verify_seconds", "sum_seconds", "contributors")
    PLAINTEXTS_FIELD_NUMBER: _ClassVar[int]
    DECRYPT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    VERIFY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SUM_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CONTRIBUTORS_FIELD_NUMBER: _ClassVar[int]
    plaintexts: _containers.RepeatedScalarFieldContainer[bytes]
    decrypt_seconds: float
    verify_seconds: float
    sum_seconds: float
    contributors: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, plaintexts: _Optional[_Iterable[bytes]] = ..., decrypt_seconds: _Optional[float] = ..., verify_seconds: _Optional[float] = ..., sum_seconds: _Optional[float] = ..., contributors: _Optional[_Iterable[str]] = ...) -> None: ...

class PublicKeyRequest(_message.Message):
    __slots__ = ("key_id",)
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    def __init__(self, key_id: _Optional[str] = ...) -> None: ...

class WithdrawRequest(_message.Message):
    __slots__ = ("round_id",)
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    def __init__(self, round_id: _Optional[str] = ...) -> None: ...

class WithdrawReply(_message.Message):
    __slots__ = ("round_id", "state")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    round_id: str
    state: str
    def __init__(self, round_id: _Optional[str] = ..., state: _Optional[str] = ...) -> None: ...

class ProjectionRequest(_message.Message):
    __slots__ = ("round_id", "key_id", "method", "dimension", "classes_per_grouping", "encoding", "n_owners", "components", "rho", "rho_prime", "ridge_noise_floor", "mask_sums", "invited")
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
    MASK_SUMS_FIELD_NUMBER: _ClassVar[int]
    INVITED_FIELD_NUMBER: _ClassVar[int]
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
    mask_sums: _containers.RepeatedScalarFieldContainer[bytes]
    invited: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, round_id: _Optional[str] = ..., key_id: _Optional[str] = ..., method: _Optional[str] = ..., dimension: _Optional[int] = ..., classes_per_grouping: _Optional[_Iterable[int]] = ..., encoding: _Optional[_Union[Encoding, _Mapping]] = ..., n_owners: _Optional[int] = ..., components: _Optional[int] = ..., rho: _Optional[float] = ..., rho_prime: _Optional[float] = ..., ridge_noise_floor: _Optional[float] = ..., mask_sums: _Optional[_Iterable[bytes]] = ..., invited: _Optional[_Iterable[str]] = ...) -> None: ...

class ProjectionChunk(_message.Message):
    __slots__ = ("header", "batch", "share")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    header: ProjectionRequest
    batch: CiphertextBatch
    share: Signed
    def __init__(self, header: _Optional[_Union[ProjectionRequest, _Mapping]] = ..., batch: _Optional[_Union[CiphertextBatch, _Mapping]] = ..., share: _Optional[_Union[Signed, _Mapping]] = ...) -> None: ...

class ProjectionResult(_message.Message):
    __slots__ = ("eigenvalues", "components", "explained_variance_ratio", "ridge", "compute_seconds", "verify_seconds", "sum_seconds", "contributors")
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
    VERIFY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SUM_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CONTRIBUTORS_FIELD_NUMBER: _ClassVar[int]
    eigenvalues: _containers.RepeatedScalarFieldContainer[float]
    components: _containers.RepeatedScalarFieldContainer[float]
    explained_variance_ratio: _containers.RepeatedScalarFieldContainer[float]
    ridge: _containers.ScalarMap[str, float]
    compute_seconds: float
    verify_seconds: float
    sum_seconds: float
    contributors: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, eigenvalues: _Optional[_Iterable[float]] = ..., components: _Optional[_Iterable[float]] = ..., explained_variance_ratio: _Optional[_Iterable[float]] = ..., ridge: _Optional[_Mapping[str, float]] = ..., compute_seconds: _Optional[float] = ..., verify_seconds: _Optional[float] = ..., sum_seconds: _Optional[float] = ..., contributors: _Optional[_Iterable[str]] = ...) -> None: ...
