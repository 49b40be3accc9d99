"""Kernel runtimes: the C++ build cache and custom ops (``cpu``), Triton and CUDA launchers (``gpu``)."""
