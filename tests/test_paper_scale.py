"""``python -m sigprop.bench.paper_scale``: the GPU run at the documents' sizes (issue 28), tried on the CPU at toy
sizes. The paper-scale run itself needs a GPU and minutes; here: its arguments are checked before any work, its
record is written after every stage with the machine it ran on, and a stage that fails is recorded, not raised."""
import json

import pytest
import torch

from sigprop.bench import paper_scale


def _run(tmp_path, *argv):
    out = tmp_path / "ps.json"
    assert paper_scale.main(["--out", str(out), "--device", "cpu", "--scale", "tiny", *argv]) == 0
    return json.loads(out.read_text())


@pytest.mark.parametrize("argv, match", [(["--budget", "0"], "positive number"), (["--budget", "nan"], "positive"),
                                         (["--stages", "nope"], "invalid choice")])
def test_arguments_are_checked_before_any_work(tmp_path, capsys, argv, match):
    with pytest.raises(SystemExit) as exit_:
        paper_scale.main(["--out", str(tmp_path / "x.json"), "--device", "cpu", *argv])
    assert exit_.value.code == 2 and match in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        paper_scale.main(["--out", str(tmp_path / "x.json")])
    assert "CUDA is not available" in capsys.readouterr().err


def test_forward_stage_records_its_machine_and_throughput(tmp_path):
    rec = _run(tmp_path, "--stages", "forward", "--budget", "60")
    assert rec["scale"] == "tiny" and rec["machine"]["device"] == "cpu" and rec["machine"]["torch"] == torch.__version__
    rows = rec["stages"]["forward"]["result"]
    assert [r["dtype"] for r in rows] == ["float32", "bfloat16"]
    assert all(r["forward_tflops"] > 0 and r["matmul_tflops"] > 0 for r in rows)


def test_a_failing_stage_is_recorded_not_raised(tmp_path, monkeypatch):
    def boom(*args):
        raise RuntimeError("out of memory (simulated)")
    monkeypatch.setattr(paper_scale, "stage_forward", boom)
    rec = _run(tmp_path, "--stages", "forward", "--budget", "60")
    assert "out of memory (simulated)" in rec["stages"]["forward"]["result"]["error"]
