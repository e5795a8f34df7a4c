"""An independent reference transformer: the plain ``nn.Module`` a reader would write.

One module per network, one sequence at a time, Python loops over layers and heads, ``nn.Linear``
layers and ``torch.softmax`` -- written from the module docstring of ``sigprop.block._network``, sharing no code
with the library. The off-the-shelf pieces (output projection ``W_O``, value, output, query and key biases,
GELU in both forms, SiLU, gated MLPs, grouped-query heads, rotary embeddings, centred LayerNorm, parallel
residuals) are written from their textbook definitions: GELU as ``x Phi(x)`` with ``Phi`` through ``erf``,
and ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``; SiLU ``x / (1 + exp(-x))``; RoPE turning the pair of
dimensions ``(i, i + r/2)`` of a head by ``t theta^(-2i/r)`` at position ``t`` (the angles in float32, as
HuggingFace computes them), head ``h`` reading key/value group ``h // (heads / kv_heads)``. ``tests/test_block.py`` checks :func:`sigprop.transformer_forward` (both kernels)
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
        c = self.c = config
        self.depth = depth
        G = c.kv_heads or c.heads
        lin, ml = torch.nn.Linear, torch.nn.ModuleList

        def per_layer(make, n):
            return ml([ml([make() for _ in range(n)]) for _ in range(depth)])

        self.q = per_layer(lambda: lin(c.d, c.head_dim), c.heads)
        self.k = per_layer(lambda: lin(c.d, c.head_dim), G)
        self.v = per_layer(lambda: lin(c.d, c.value_dim), G)
        # the output projection W_O (with its bias b_O), or without one only the bias b_O
        self.has_o = c.sigma_o2 is not None
        self.o = ml([lin(c.d, c.d) for _ in range(depth)]) if self.has_o else None
        self.bo = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(c.d)) for _ in range(depth)])
        self.fc1 = ml([lin(c.d, c.hidden) for _ in range(depth)])
        self.fc3 = ml([lin(c.d, c.hidden) for _ in range(depth)])    # the gate's linear path (gated MLPs)
        self.fc2 = ml([lin(c.hidden, c.d) for _ in range(depth)])

    @torch.no_grad()
    def load(self, params, i: int):
        for l in range(self.depth):
            for h in range(self.c.heads):
                self.q[l][h].weight.copy_(params.w_q[i, l, h])
                self.q[l][h].bias.copy_(params.b_q[i, l, h])
            for g in range(len(self.k[l])):
                self.k[l][g].weight.copy_(params.w_k[i, l, g])
                self.k[l][g].bias.copy_(params.b_k[i, l, g])
                self.v[l][g].weight.copy_(params.w_v[i, l, g])
                self.v[l][g].bias.copy_(params.b_v[i, l, g])
            if self.has_o:
                self.o[l].weight.copy_(params.w_o[i, l])
                self.o[l].bias.copy_(params.b_o[i, l])
            else:
                self.bo[l].copy_(params.b_o[i, l])
            self.fc1[l].weight.copy_(params.w1[i, l])
            self.fc1[l].bias.copy_(params.b1[i, l])
            if self.c.gated:
                self.fc3[l].weight.copy_(params.w3[i, l])
                self.fc3[l].bias.copy_(params.b3[i, l])
            self.fc2[l].weight.copy_(params.w2[i, l])
            self.fc2[l].bias.copy_(params.b2[i, l])
        return self

    def _ln(self, x):
        if self.c.ln_center:
            x = x - x.mean(-1, keepdim=True)
        return x / torch.sqrt(torch.clamp(torch.mean(x * x, dim=-1, keepdim=True), min=1e-12))

    def _rotate(self, x):
        """RoPE on one head's ``(T, d_k)`` queries or keys: pair ``(i, i + r/2)`` turned by ``t theta^(-2i/r)``."""
        r = int(self.c.head_dim * self.c.rope_fraction)
        out = x.clone()
        for i in range(r // 2):
            freq = torch.tensor(1.0 / self.c.rope_theta ** (2 * i / r), dtype=torch.float32)
            for t in range(x.shape[0]):
                angle = torch.tensor(float(t), dtype=torch.float32) * freq
                cos, sin = float(torch.cos(angle)), float(torch.sin(angle))
                a, b = x[t, i], x[t, i + r // 2]
                out[t, i], out[t, i + r // 2] = a * cos - b * sin, b * cos + a * sin
        return out

    def _sa(self, x, l):
        c = self.c
        heads = []
        per_group = c.heads // len(self.k[l])
        for h in range(c.heads):
            g = h // per_group
            q, k = self.q[l][h](x), self.k[l][g](x)
            if c.positions == "rope":
                q, k = self._rotate(q), self._rotate(k)
            a = q @ k.T * c.scale
            if c.causal:
                a = a.masked_fill(torch.ones_like(a, dtype=torch.bool).triu(1), float("-inf"))
            v = self.v[l][g](x)
            if c.gain_control:
                v = v - v.mean(0, keepdim=True)
            heads.append(torch.softmax(a, dim=-1) @ v)
        out = torch.cat(heads, dim=-1)
        return self.o[l](out) if self.has_o else out + self.bo[l]

    def _mlp(self, x, l):
        act = {"relu": torch.relu, "tanh": torch.tanh, "linear": lambda z: z,
               "gelu": lambda z: z * 0.5 * (1.0 + torch.erf(z / math.sqrt(2.0))),
               "gelu_tanh": lambda z: 0.5 * z * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z**3))),
               "silu": lambda z: z / (1.0 + torch.exp(-z))}
        h = act[self.c.activation](self.fc1[l](x))
        if self.c.gated:
            h = h * self.fc3[l](x)
        return self.fc2[l](h)

    def forward(self, x):
        """One sequence ``(T, d)`` -> list of the ``depth + 1`` representations."""
        c, outs = self.c, [x]
        for l in range(self.depth):
            if c.parallel:   # x + SA(LN x) + MLP(LN x), with the skip strengths of BlockConfig
                y = c.alpha_sa * x + c.branch_sa * self._sa(self._ln(x), l)
                x = c.alpha_mlp * y + c.branch_mlp * self._mlp(self._ln(x), l) if c.mlp else y
                outs.append(x)
                continue
            sublayers = [(self._sa, c.alpha_sa, c.branch_sa)] + ([(self._mlp, c.alpha_mlp, c.branch_mlp)] if c.mlp else [])
            for branch, skip, w in sublayers:
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
