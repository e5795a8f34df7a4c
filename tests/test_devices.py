"""Device correctness as a property of the library, testable without a second device.

On a CUDA or MPS machine every sampler must create its tensors on the device of its inputs or generator;
a tensor created without an explicit device lands on torch's default device and mixes devices (the crash
class of `spectral_qk_matrix` on CUDA). Here the default device is set to ``meta`` while the inputs and
generators are on the CPU: any tensor created without an explicit device becomes a meta tensor, which cannot
be read, so the call fails or returns meta tensors -- both caught below. One place decides the widest float a
device has (MPS: float32).
"""
import dataclasses

import numpy as np
import pytest
import torch

import sigprop as sp


def _devices(out, found):
    if isinstance(out, torch.Tensor):
        found.add(out.device.type)
    elif isinstance(out, dict):
        for v in out.values():
            _devices(v, found)
    elif isinstance(out, (tuple, list)):
        for v in out:
            _devices(v, found)
    elif dataclasses.is_dataclass(out) and not isinstance(out, type):
        for f in dataclasses.fields(out):
            _devices(getattr(out, f.name), found)
    return found


CFG = sp.BlockConfig(d=8, heads=2)
# inputs are made here, on the CPU, outside the meta default of the test
X53, X124, EYE4, TOK = torch.randn(5, 3), torch.randn(12, 4), torch.eye(4), torch.zeros(2, 4, dtype=torch.long)
LM = sp.TinyLM(sp.LMConfig(vocab=5, T=4, d=8), generator=0)
CALLS = {
    "gaussian_tokens": lambda: sp.gaussian_tokens(2, T=3, d=4, generator=0),
    "equicorrelated_tokens": lambda: sp.equicorrelated_tokens(2, T=3, d=4, rho=0.3, normalised=True, generator=0),
    "exact_equicorrelated_tokens": lambda: sp.exact_equicorrelated_tokens(2, T=3, d=5, rho=0.3, generator=0),
    "orthogonal_tokens": lambda: sp.orthogonal_tokens(2, T=3, d=5, generator=0),
    "random_walk_tokens": lambda: sp.random_walk_tokens(2, T=3, d=4, sigma=EYE4, generator=0),
    "spectral_qk_matrix": lambda: sp.spectral_qk_matrix(2, d=4, mean=0.1, scale=0.5, generator=0),
    "anisotropic_sigma": lambda: sp.anisotropic_sigma(4, generator=0),
    "monte_carlo": lambda: sp.monte_carlo(lambda n, g: torch.randn(n, 2, generator=g, device=g.device), 8, generator=0,
                                          device="cpu"),
    "mc_rem_moments": lambda: sp.mc_rem_moments(2.0, T=16, n=8, generator=0, device="cpu"),
    "mc_cross_overlap": lambda: sp.mc_cross_overlap(2.0, T=16, n=8, p=0.2, generator=0, device="cpu"),
    "mc_attention_ipr": lambda: sp.mc_attention_ipr([1.0, 2.0], T=50, d=4, inits=2, queries=3, generator=0, device="cpu"),
    "mc_ipr_finite_width": lambda: sp.mc_ipr_finite_width([1.0], T=50, d=4, samples=4, generator=0),
    "mc_attention_layer": lambda: sp.mc_attention_layer(2.0, T=4, d=8, n=4, rho=0.3, generator=0, device="cpu"),
    "mc_rem_query_grad_sq_norm": lambda: sp.mc_rem_query_grad_sq_norm(1.0, 8, 4, 4, generator=0, device="cpu", progress=False),
    "sample_transformer": lambda: sp.sample_transformer(CFG, 2, inits=2, generator=0),
    "mc_cosine_vs_depth": lambda: sp.mc_cosine_vs_depth(CFG, 2, T=4, inits=2, generator=0),
    "mc_value_correlation": lambda: sp.mc_value_correlation([0.5], generator=0, n_tokens=3, d=4, d_k=2, d_v=2, samples=8),
    "estimate": lambda: sp.estimate(X53),
    "curve_agreement": lambda: sp.curve_agreement(X124, np.zeros(4)),
    "TinyLM": lambda: LM(TOK),
    "MarkovSource": lambda: sp.MarkovSource(4, generator=0).sample(3, 5, generator=1),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_no_tensor_is_created_without_an_explicit_device(name):
    with torch.device("meta"):
        out = CALLS[name]()
    assert _devices(out, set()) <= {"cpu"}, f"{name} returned tensors on {_devices(out, set())}"


def test_the_widest_float_of_a_device():
    assert sp.widest_float(torch.device("mps")) is torch.float32      # Apple MPS has no float64
    assert sp.widest_float(torch.device("cpu")) is torch.float64
    assert sp.widest_float("cuda") is torch.float64
