"""The other transformers major: the HF-model tests run again in an environment with transformers 5.x when this one
has 4.x, or 4.44+ (below 5) when it has 5.x, so both majors are tested by every ``make test``.

The environment is made as tests/test_colab.py makes its Colab: a new virtual environment that sees this one's
packages through a ``.pth`` file of links, except sigprop (imported from the checkout) and transformers with the
packages whose majors move with it (huggingface_hub, tokenizers, safetensors), which pip installs into it from the
package index. It is kept under ``$SIGPROP_TEST_CACHE`` (default ``~/.cache/sigprop-tests``), keyed by the
requirement, Python and torch versions, so only the first run installs (about 2 minutes on the CI machine; later
runs reuse it: about 1 minute for the tests themselves). Where the index cannot be reached the test is skipped with
pip's message. Only the files that test HF models run there: tests/test_probe_families.py, tests/test_probe.py,
tests/test_real.py, tests/test_models_edges.py, tests/test_hf_registry.py (every family of that major's registry),
tests/test_hf_families.py and tests/test_read_right.py.
"""
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import torch

transformers = pytest.importorskip("transformers")
from test_colab import _preinstalled  # noqa: E402  (the Colab simulation's environment of links)

ROOT = pathlib.Path(__file__).resolve().parents[1]
MAJOR = int(transformers.__version__.split(".")[0])
OTHER = "transformers>=5,<6" if MAJOR < 5 else "transformers>=4.44,<5"
MOVING = ("transformers", "huggingface_hub", "tokenizers", "safetensors", "hf_xet")
FILES = ["tests/test_probe_families.py", "tests/test_probe.py", "tests/test_real.py", "tests/test_models_edges.py",
         "tests/test_hf_registry.py", "tests/test_hf_families.py", "tests/test_read_right.py"]


def _environment() -> pathlib.Path:
    cache = pathlib.Path(os.environ.get("SIGPROP_TEST_CACHE", pathlib.Path.home() / ".cache" / "sigprop-tests"))
    tag = f"{OTHER.split('>=')[1].split(',')[0]}-py{sys.version_info[0]}{sys.version_info[1]}-torch{torch.__version__}"
    # keyed by this environment too: the cached environment links to this one's packages
    here = hashlib.sha256(sys.prefix.encode()).hexdigest()[:10]
    root = cache / f"transformers-{tag}-{here}".replace("+", "_")
    py = root / "venv" / "bin" / "python"
    if (root / "ready").exists() and py.exists() and subprocess.run(
            [str(py), "-c", "import torch, transformers"], capture_output=True, timeout=300).returncode == 0:
        return py
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True, timeout=300)
    _preinstalled(root / "links", without=MOVING)
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (pathlib.Path(purelib) / "this_environment.pth").write_text(str(root / "links") + "\n")
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", OTHER],
                         capture_output=True, text=True, timeout=1200)
    if pip.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"could not install {OTHER} from the package index: {pip.stderr.strip()[-800:]}")
    (root / "ready").write_text(OTHER + "\n")
    return py


def test_hf_tests_pass_under_the_other_major():
    py = _environment()
    version = subprocess.run([str(py), "-c", "import transformers; print(transformers.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert int(version.split(".")[0]) != MAJOR, version
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST_", "VIRTUAL_ENV"))}
    env.update(PYTHONPATH=str(ROOT / "lib"), SIGPROP_PROFILE="quick", SIGPROP_DEVICE="cpu")
    run = subprocess.run([str(py), "-m", "pytest", *FILES, "-q", "-p", "no:cacheprovider", "-x"],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=1200)
    assert run.returncode == 0, f"transformers {version}:\n{run.stdout[-4000:]}\n{run.stderr[-2000:]}"
    here = subprocess.run([str(py), "-c", "import sigprop; print(sigprop.__file__)"], capture_output=True, text=True,
                          env=env, check=True).stdout.strip()
    assert here.startswith(str(ROOT / "lib")), here       # the checkout's sigprop, not an installed one
