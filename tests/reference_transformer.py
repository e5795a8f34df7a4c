"""An independent reference transformer: the plain ``nn.Module`` a reader would write.

One module per network, one sequence at a time, Python loops over layers and heads, ``nn.Linear``
layers and ``torch.softmax`` -- written from the module docstring of ``sigprop.block._network``, sharing no code
with the library. The off-the-shelf pieces (output projection ``W_O``, value and output biases, GELU in
both forms) are written from their textbook definitions: GELU as ``x Phi(x)`` with ``Phi`` through
``erf``, and ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``. ``tests/test_block.py`` checks :func:`sigprop.transformer_forward` (both kernels)
against it; ``python -m sigprop.bench`` times the library against it (from a checkout).
"""
from __future__ import annotations

import math

import torch


class NaiveTransformer(torch.nn.Module):
    """The straightforward implementation: one module per network, one sequence at a time.

    ``NaiveTransformer(config, depth)``; :meth:`load` copies network ``i`` of a
    :class:`sigprop.TransformerParams`. Python loops over layers and heads, ``nn.Linear`` layers,
    ``torch.softmax`` -- what a reader would write from the module docstring of ``sigprop.block._network``.
    """

    def __init__(self, config, depth: int):
        super().__init__()
        c = config
        self.c, self.depth = c, depth
        lin = torch.nn.Linear
        self.q = torch.nn.ModuleList([torch.nn.ModuleList([lin(c.d, c.head_dim, bias=False) for _ in range(c.heads)])
                                      for _ in range(depth)])
        self.k = torch.nn.ModuleList([torch.nn.ModuleList([lin(c.d, c.head_dim, bias=False) for _ in range(c.heads)])
                                      for _ in range(depth)])
        self.v = torch.nn.ModuleList([torch.nn.ModuleList([lin(c.d, c.value_dim) for _ in range(c.heads)])
                                      for _ in range(depth)])
        # the output projection W_O (with its bias b_O), or without one only the bias b_O
        self.has_o = c.sigma_o2 is not None
        self.o = torch.nn.ModuleList([lin(c.d, c.d) for _ in range(depth)]) if self.has_o else None
        self.bo = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(c.d)) for _ in range(depth)])
        self.fc1 = torch.nn.ModuleList([lin(c.d, c.hidden) for _ in range(depth)])
        self.fc2 = torch.nn.ModuleList([lin(c.hidden, c.d) for _ in range(depth)])

    @torch.no_grad()
    def load(self, params, i: int):
        for l in range(self.depth):
            for h in range(self.c.heads):
                self.q[l][h].weight.copy_(params.w_q[i, l, h])
                self.k[l][h].weight.copy_(params.w_k[i, l, h])
                self.v[l][h].weight.copy_(params.w_v[i, l, h])
                self.v[l][h].bias.copy_(params.b_v[i, l, h])
            if self.has_o:
                self.o[l].weight.copy_(params.w_o[i, l])
                self.o[l].bias.copy_(params.b_o[i, l])
            else:
                self.bo[l].copy_(params.b_o[i, l])
            self.fc1[l].weight.copy_(params.w1[i, l])
            self.fc1[l].bias.copy_(params.b1[i, l])
            self.fc2[l].weight.copy_(params.w2[i, l])
            self.fc2[l].bias.copy_(params.b2[i, l])
        return self

    @staticmethod
    def _ln(x):
        return x / torch.sqrt(torch.clamp(torch.mean(x * x, dim=-1, keepdim=True), min=1e-12))

    def _sa(self, x, l):
        c = self.c
        heads = []
        for h in range(c.heads):
            a = self.q[l][h](x) @ self.k[l][h](x).T * c.scale
            if c.causal:
                a = a.masked_fill(torch.ones_like(a, dtype=torch.bool).triu(1), float("-inf"))
            v = self.v[l][h](x)
            if c.gain_control:
                v = v - v.mean(0, keepdim=True)
            heads.append(torch.softmax(a, dim=-1) @ v)
        out = torch.cat(heads, dim=-1)
        return self.o[l](out) if self.has_o else out + self.bo[l]

    def _mlp(self, x, l):
        act = {"relu": torch.relu, "tanh": torch.tanh, "linear": lambda z: z,
               "gelu": lambda z: z * 0.5 * (1.0 + torch.erf(z / math.sqrt(2.0))),
               "gelu_tanh": lambda z: 0.5 * z * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z**3)))}
        return self.fc2[l](act[self.c.activation](self.fc1[l](x)))

    def forward(self, x):
        """One sequence ``(T, d)`` -> list of the ``depth + 1`` representations."""
        c, outs = self.c, [x]
        for l in range(self.depth):
            for branch, skip, w in ((self._sa, c.alpha_sa, c.branch_sa), (self._mlp, c.alpha_mlp, c.branch_mlp)):
                if branch is self._mlp and not c.mlp:
                    continue
                if c.norm == "post":
                    x = self._ln(skip * x + w * branch(x, l))
                elif c.norm == "pre":
                    x = skip * x + w * branch(self._ln(x), l)
                else:
                    x = skip * x + w * branch(x, l)
            outs.append(x)
        return outs


def naive_forward(models, x):
    """Loop over networks and sequences: ``x (inits, samples, T, d)`` -> ``(depth+1, inits, samples, T, d)``."""
    out = [[torch.stack(m(x[i, b])) for b in range(x.shape[1])] for i, m in enumerate(models)]
    return torch.stack([torch.stack(o) for o in out]).permute(2, 0, 1, 3, 4)
