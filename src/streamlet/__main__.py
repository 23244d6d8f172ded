"""The stream demo; replaced below."""
