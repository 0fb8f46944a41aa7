"""An embedded test cloud: real Nova and Placement with fake vGPU hosts."""
