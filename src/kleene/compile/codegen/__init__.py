"""The kernel writer: the step of a plan and its reverse mode spelled in C++ (CPU), Triton and CUDA (GPU)."""
