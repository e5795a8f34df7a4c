"""A Colab start, simulated: a fresh environment with Colab's preinstalled packages but no sigprop, a page's
first (install) cell pointed at a locally built wheel through ``SIGPROP_INSTALL``, then the page runs. The page is
the one Colab opens: the primer's built notebook (reader's edition, ``make book``: its set-up cell, book/sources.py),
or, without a build, the primer's source (its hidden install cell).

"Colab's preinstalled packages" are this environment's (torch, numpy, scipy, matplotlib, pandas, ipywidgets,
transformers, Jupyter), made visible to a new virtual environment without sigprop; ``google.colab`` is faked
by one cell put in front of the page. The page must install sigprop from the wheel (not import the
checkout) and run without errors.
"""
import json
import os
import pathlib
import site
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILT = ROOT / "_build" / "html" / "_notebooks" / "reader" / "book" / "primer.ipynb"
PAGE = BUILT if BUILT.is_file() else ROOT / "book" / "primer.ipynb"
FAKE_COLAB = 'import sys, types\nsys.modules["google.colab"] = types.ModuleType("google.colab")  # simulated Colab'
WHERE = 'import sigprop\nprint("SIGPROP_FILE", sigprop.__file__)'


def _preinstalled(dest: pathlib.Path, without=()) -> pathlib.Path:
    """A folder of links to this environment's packages, without sigprop (Colab has none) and without the
    distributions named in ``without`` (tests/test_transformers_major.py installs other versions of them)."""
    dest.mkdir()
    skip = tuple(n.lower().replace("-", "_") for n in without)
    for sp_dir in site.getsitepackages():
        for entry in pathlib.Path(sp_dir).iterdir():
            name = entry.name.lower()
            if (name.startswith(("sigprop", "__editable__", "_sigprop")) or entry.suffix == ".pth"
                    or (skip and name.replace("-", "_").startswith(skip))):
                continue
            if not (dest / entry.name).exists():
                (dest / entry.name).symlink_to(entry)
    return dest


def _cell(text):
    return {"cell_type": "code", "execution_count": None, "id": f"sim{abs(hash(text)) % 10**8}", "metadata": {},
            "outputs": [], "source": text}


def test_a_page_installs_sigprop_from_a_wheel_and_runs(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels),
                    str(ROOT)], check=True, timeout=600)
    wheel = next(wheels.glob("sigprop-*.whl"))
    env_dir = tmp_path / "colab"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=300)
    py = env_dir / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (pathlib.Path(purelib) / "colab_preinstalled.pth").write_text(str(_preinstalled(tmp_path / "preinstalled")) + "\n")
    probe = subprocess.run([str(py), "-c", "import torch, matplotlib; import importlib.util as u; "
                                           "print(u.find_spec('sigprop') is None)"], capture_output=True, text=True)
    assert probe.stdout.strip() == "True", probe.stdout + probe.stderr          # a fresh environment: no sigprop

    nb = json.loads(PAGE.read_text())
    nb["cells"] = [_cell(FAKE_COLAB)] + nb["cells"] + [_cell(WHERE)]
    page = tmp_path / "page.ipynb"
    page.write_text(json.dumps(nb))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST_", "VIRTUAL_ENV"))}
    env.update(SIGPROP_INSTALL=str(wheel), SIGPROP_PROFILE="quick", PATH=f"{env_dir / 'bin'}:{env['PATH']}",
               MPLBACKEND="Agg")
    run = subprocess.run([str(py), "-m", "nbconvert", "--to", "notebook", "--execute", "--output", "executed.ipynb",
                          "--ExecutePreprocessor.timeout=600", str(page)], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    done = json.loads((tmp_path / "executed.ipynb").read_text())
    printed = "".join("".join(o.get("text", "")) for c in done["cells"] for o in c.get("outputs", []))
    where = [line.split(" ", 1)[1] for line in printed.splitlines() if line.startswith("SIGPROP_FILE")]
    assert where and where[0].startswith(str(env_dir)), where                   # installed from the wheel
