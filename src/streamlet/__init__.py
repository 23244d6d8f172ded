"""streamlet: MLX's devices and streams on Linux, for the CPU (NumPy) and NVIDIA GPUs (CuPy)."""
__version__ = "0.1.0"
