"""Tests for sigprop.block._depth: the cosine and attention IPR through depth (issue 37, item 2)."""
import numpy as np
import torch

import sigprop as sp
from conftest import Z
from sigprop.block import apply_block

th = sp.theory


def test_post_ln_first_block_reads_the_raw_input_norm():
    # y2[0] (block 1's attention) ignored q0 under post-LN (0.489 at q0 = 1 and 4): block 1's attention reads the raw
    # input. Network: 48 networks x 4 sequences, T = 16, d = 256, beta = 2; measured 0.0996 +- 0.0005, 0.470 +- 0.003,
    # 0.850 +- 0.002 at q0 = 0.25, 1, 4 against the map's 0.0995, 0.474, 0.853
    T, d = 16, 256
    c = sp.BlockConfig.from_beta(2.0, T=T, d=d, norm="post")
    maps = [float(th.cosine_vs_depth(c, 1, T=T, rho0=0.2, q0=q0).y2[0]) for q0 in (0.25, 1.0, 4.0)]
    assert maps[0] < 0.2 < maps[1] < 0.6 < maps[2]
    for q0, y2 in zip((0.25, 4.0), (maps[0], maps[2])):
        params = sp.sample_transformer(c, 1, inits=48, generator=1)
        x = sp.equicorrelated_tokens(48, 4, T=T, d=d, rho=0.2, q=q0, generator=2)
        rec = []
        apply_block(x, params, c, 0, rec)
        est = sp.estimate(rec[0]["attention"].pow(2).sum(-1).mean((1, 2, 3)).double())
        assert est.agrees(torch.tensor(y2), z=Z), (q0, est, y2)
    # pre-LN attention reads LN(x): q0 does not matter
    pre = sp.BlockConfig.from_beta(2.0, T=T, d=d, norm="pre")
    y = [float(th.cosine_vs_depth(pre, 1, T=T, rho0=0.2, q0=q0).y2[0]) for q0 in (0.25, 4.0)]
    assert y[0] == y[1]


def test_trainability_diagram_inherits_q0():
    # T -> infinity form: entropy collapse at the input depends on the input's norm under post-LN
    a = th.cosine_vs_depth(3, beta=np.array([1.0, 2.0]), rho0=0.1, q0=4.0, norm="post").y2[0]
    b = th.cosine_vs_depth(3, beta=np.array([1.0, 2.0]), rho0=0.1, q0=0.25, norm="post").y2[0]
    assert np.all(a >= b) and np.any(a > b)
