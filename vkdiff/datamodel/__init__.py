"""vkdiff's data model: a leaf that every room may import and that imports nothing else from vkdiff.

Statuses, results and their merge rule, the tolerance policy, the decoded ``VkGraph``
records, the operator schemas that name every argument, and the format of verified
cache entries.
"""

from vkdiff.datamodel.arithmetic import FMA_MODELS, STORE_ROUNDINGS, Arithmetic
from vkdiff.datamodel.cache import (REPAIRED_FLAG, REPAIRS, CacheCorruptError, Repair, cached_folder,
                                            read_entry, record_repair, verify_manifest, write_entry,
                                            write_manifest)
from vkdiff.datamodel.paths import CACHE_ENV, CacheUnwritableError, cache_dir, cache_root, ensure_cache_writable
from vkdiff.datamodel.result import (CRASH_FLAG, DEVICE_LOST_FLAG, HANG_FLAG, HOST, SCHEMA, Result, bucket_of,
                                             clip, merge, parse_time, versions)
from vkdiff.datamodel.schemas import (DTYPE_FROM_OUTPUT, OP_SCHEMAS, Argument, OpSchema, SchemaError,
                                              UnknownOpError, schema_of)
from vkdiff.datamodel.status import Status
from vkdiff.datamodel.tolerance import Tolerance
from vkdiff.datamodel.vkgraph import (MEMORY_LAYOUTS, STORAGE_TYPES, VK_DTYPES, Call, Delegate, VkOp, VkTensorInfo,
                                      content_hash)
from vkdiff.datamodel.program import (SCALAR_TYPES, DelegateEntry, Instruction, Method, PreparedProgram, Program,
                                      ProgramFormatError, Source)

__all__ = [
    "FMA_MODELS", "STORE_ROUNDINGS", "Arithmetic",
    "REPAIRED_FLAG", "REPAIRS", "CacheCorruptError", "Repair", "cached_folder", "read_entry", "record_repair", "verify_manifest",
    "write_entry", "write_manifest",
    "CACHE_ENV", "CacheUnwritableError", "cache_root", "ensure_cache_writable", "CRASH_FLAG", "DEVICE_LOST_FLAG", "HANG_FLAG", "DTYPE_FROM_OUTPUT", "HOST", "OP_SCHEMAS", "SCHEMA", "MEMORY_LAYOUTS", "STORAGE_TYPES", "VK_DTYPES", "Argument", "Call",
    "Delegate", "OpSchema", "Result", "bucket_of", "SchemaError", "Status", "Tolerance", "UnknownOpError", "VkOp", "VkTensorInfo",
    "cache_dir", "clip", "content_hash", "merge", "parse_time", "schema_of", "versions",
    "SCALAR_TYPES", "DelegateEntry", "Instruction", "Method", "PreparedProgram", "Program", "ProgramFormatError", "Source",
]
