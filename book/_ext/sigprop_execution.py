"""Sphinx extension: page execution that a busy machine cannot stall.

myst-nb executes the pages with nbclient in the build process; ``sigprop.bench._pages.bound_kernel_waits``
makes its waits for kernel messages poll in one-second slices, so that a missed socket wake-up costs a
second instead of the whole cell timeout (see its docstring).
"""


def setup(app):
    from sigprop.bench._pages import bound_kernel_waits

    bound_kernel_waits()
    return {"parallel_read_safe": True, "parallel_write_safe": True}
