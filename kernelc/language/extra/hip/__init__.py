"""``kl.extra.hip``: Triton's AMD helpers. kernelc targets NVIDIA GPUs only, so every name here is an
error that says so (importing the module works, so code that only mentions it keeps working)."""


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(f"tl.extra.hip.{name} is not supported by kernelc: kernelc compiles for NVIDIA GPUs "
                         f"(use tl.extra.cuda / tl.extra.libdevice)")
