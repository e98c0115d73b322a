"""MLX-LM's runtime: `mlx_lm lora`'s compiled step on MLX's lazy graph (mlx 0.32.4, mlx-lm 0.32.2)."""
