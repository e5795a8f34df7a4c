"""A published model's block at its default initialisation (``sp.presets.PUBLISHED_2026``): the config the book's
diagrams place, and the same block at a width a laptop runs.
"""
from __future__ import annotations

from ..block import BlockConfig
from ..models._montecarlo import at_width

__all__: list[str] = []
__course__ = ["published_block"]


def published_block(shape, *, std: float = 0.02, d: int | None = None) -> tuple:
    """``(BlockConfig, depth)`` of a published shape (an entry of ``sp.presets.PUBLISHED_2026``) when every linear layer
    is drawn from ``N(0, std^2)`` (HF's ``initializer_range``; the router too): ``sigma_qk2 = std^2``, ``sigma_v2 =
    std^2 d``, ``sigma_o2 = std^2 heads d_v``, ``sigma_w2 = std^2 d``, ``sigma_w2_out = std^2 d_ff``,
    ``router_sigma2 = std^2 d``. ``d`` gives the same variances per unit width at a smaller width
    (:func:`sigprop.at_width`)."""
    fields = dict(shape)
    depth = fields.pop("depth")
    s2 = float(std) ** 2
    c = BlockConfig(**fields, sigma_qk2=s2, sigma_v2=s2 * fields["d"], sigma_o2=1.0, sigma_w2=s2 * fields["d"])
    c = BlockConfig(**{**c.__dict__, "sigma_o2": s2 * c.heads * c.value_dim, "sigma_w2_out": s2 * c.hidden,
                       "router_sigma2": s2 * c.d})
    return (c if d is None else at_width(c, d)), depth
