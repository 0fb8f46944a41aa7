"""osc-mdev: OpenStackClient commands for mediated devices (vGPUs)."""
