"""The engine: configuration (profiles, devices, threads, precision), randomness, input validation,
estimates with standard errors, the Monte Carlo engine, curve-level agreement tests and the measures of
a forward pass (overlaps, cosines, IPR, entropy).

Every other folder builds on this one, and may import its private helpers (``_config._work_dtype``,
``_validate.check_*``); nothing here imports another folder of sigprop.
"""
