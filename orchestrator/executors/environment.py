"""The environment a cell's worker process starts with: an allow-list, never a copy.

A worker runs training code, the user's own among it, and needs nothing of the driver's
credentials. It gets what a training process needs (the path, home and locale, thread,
framework and GPU settings, proxies (without their user and password) and CA bundles, the
tool's own `MATRIX_BENCH_*`), and of those, none that names a credential
(`redact.names_a_credential`), nor anything of a cloud SDK: `AWS_*`, `AZURE_*`,
`GOOGLE_*`, `CLOUDSDK_*`. Everything else stays behind, so a token the user exported for
another tool (HF_TOKEN, WANDB_API_KEY, GITHUB_TOKEN) never reaches
`/proc/<worker>/environ`.

This is the process executor's, wherever it runs (here, or in a Ray task on any node). A
container executor builds its containers' environment from nothing (executors/container.py)
but for the thread settings (`thread_settings`), so a cell computes on the same threads in
a process or a container and two stacks compare on equal terms. Those are the driver's
wherever the executor runs: a Ray task runs its cell `with_thread_settings` of the driver,
not with Ray's own `OMP_NUM_THREADS=1` (which Ray sets in every task where none is set), so
that a cell computes on the same threads under Ray as with `--no-ray`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from urllib.parse import urlsplit, urlunsplit

from orchestrator.redact import names_a_credential
from orchestrator.worker.threads import THREAD_PREFIXES, thread_variables

ALLOWED_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "LANG", "LANGUAGE",
    "TMPDIR", "TEMP", "TMP", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR",
    "VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH", "LD_PRELOAD", "GLIBC_TUNABLES",
    "PYTHONPATH", "PYTHONHASHSEED", "PYTHONWARNINGS", "PYTHONDONTWRITEBYTECODE",
    "PYTHONFAULTHANDLER", "PYTHONMALLOC",
    "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE",
    "TRANSFORMERS_CACHE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM",
    "KERAS_BACKEND", "KERAS_HOME",
    "SLURM_CPUS_PER_TASK",  # a count, no secret: the CPUs a rank shares out (worker/threads.py)
}) | frozenset({  # TensorFlow's own, by name: Terraform's TF_VAR_*, TF_CLI_* share the prefix
    "TF_CPP_MIN_LOG_LEVEL", "TF_CPP_MAX_VLOG_LEVEL", "TF_CPP_VMODULE", "TF_CPP_LOG_THREAD_ID",
    "TF_ENABLE_ONEDNN_OPTS", "TF_FORCE_GPU_ALLOW_GROWTH", "TF_GPU_ALLOCATOR",
    "TF_GPU_THREAD_MODE", "TF_GPU_THREAD_COUNT", "TF_XLA_FLAGS", "TF_DETERMINISTIC_OPS",
    "TF_CUDNN_DETERMINISTIC", "TF_CUDNN_USE_AUTOTUNE", "TF_NUM_INTEROP_THREADS",
    "TF_NUM_INTRAOP_THREADS", "TF_USE_LEGACY_KERAS", "TF_ENABLE_AUTO_MIXED_PRECISION",
    "TF_FORCE_UNIFIED_MEMORY", "TF_GPU_HOST_MEM_LIMIT_IN_MB", "TF_CONFIG", "TF2_BEHAVIOR",
    "TF_ENABLE_XLA",
})
ALLOWED_PREFIXES = (
    "LC_",  # locale
    "MATRIX_BENCH_",  # the tool's own (data directory, dataset mirror)
    *THREAD_PREFIXES, "MALLOC_",
    # frameworks and compilers
    "ONEDNN_", "DNNL_", "XLA_", "JAX_", "TORCH_", "TORCHINDUCTOR_", "PYTORCH_",
    "TRITON_", "GLOO_",
    # GPUs and their collectives
    "CUDA_", "CUDNN_", "CUBLAS_", "CUBLASLT_", "NCCL_", "NVIDIA_", "HIP_", "ROCR_", "HSA_",
    "MIOPEN_",
)
CLOUD_SDK_PREFIXES = ("AWS_", "AZURE_", "GOOGLE_", "GCLOUD_", "CLOUDSDK_")


PROXY_NAMES = frozenset({"http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY",
                         "HTTPS_PROXY", "ALL_PROXY"})


def worker_environment(source: Mapping[str, str]) -> dict[str, str]:
    """The variables of `source` a worker may see; a proxy without its user and password
    (`http://user:pw@proxy:3128` reaches a worker as `http://proxy:3128`)."""
    return {name: without_credentials(value) if name in PROXY_NAMES else value
            for name, value in source.items() if admitted(name)}


def thread_settings(source: Mapping[str, str]) -> dict[str, str]:
    """The variables of `source` that set the math libraries' threads, for a container or
    a Ray task (`with_thread_settings`)."""
    return {name: value for name, value in thread_variables(source).items() if admitted(name)}


@contextlib.contextmanager
def with_thread_settings(settings: Mapping[str, str]) -> Iterator[None]:
    """This process's thread settings are exactly `settings` (`thread_settings` of the
    driver's environment) while the block runs, and its own again after: in a Ray task,
    where Ray has set OMP_NUM_THREADS=1 unless the driver's environment set it, the cell
    gets what the same cell gets with `--no-ray`."""
    own = thread_variables(os.environ)
    try:
        _set_threads(settings)
        yield
    finally:
        _set_threads(own)


def _set_threads(settings: Mapping[str, str]) -> None:
    for name in thread_variables(os.environ):
        del os.environ[name]
    os.environ.update(thread_settings(settings))


def without_credentials(url: str) -> str:
    """A proxy URL without the user and password it may carry; "" where it cannot be read
    (a proxy the worker cannot use is better than a password it should not hold)."""
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return ""
    if "@" not in parts.netloc:
        return url
    host = f"[{host}]" if ":" in host else host
    return urlunsplit((parts.scheme, host + port, parts.path, parts.query, parts.fragment))


def admitted(name: str) -> bool:
    if withheld(name):
        return False
    return name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)


def withheld(name: str) -> bool:
    """Whether no worker may hold variable `name`, whoever offers it: a credential's name,
    or anything of a cloud SDK."""
    return names_a_credential(name) or name.upper().startswith(CLOUD_SDK_PREFIXES)
