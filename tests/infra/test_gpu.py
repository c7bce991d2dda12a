"""GPUs: the driver sees them; on VMs the container toolkit hands them to Docker."""

import pytest


def gpu_present(host) -> bool:
    if host.file("/dev/nvidiactl").exists:
        return True
    out = host.run(
        "for d in /sys/bus/pci/devices/*; do "
        '[ "$(cat $d/vendor)" = 0x10de ] && case "$(cat $d/class)" in 0x03*) echo $d;; esac; '
        "done; true"
    )
    return bool(out.stdout.strip())


@pytest.fixture
def gpu(host, name, testbed):
    if not gpu_present(host):
        pytest.skip(f"{name} has no NVIDIA GPU (no /dev/nvidiactl, none on the PCI bus)")
    return int(testbed.var("node_gpus", name) or 0)


def test_nvidia_smi_lists_the_gpus(host, gpu):
    out = host.check_output("nvidia-smi -L")
    listed = [line for line in out.splitlines() if line.startswith("GPU ")]
    assert len(listed) >= max(gpu, 1), out


def test_container_toolkit(host, name, testbed, gpu):
    if testbed.var("node_kind", name) != "vm":
        pytest.skip(f"{name} is a {testbed.var('node_kind', name)}: the toolkit lives on its host")
    if not testbed.var("enable_nvidia", name):
        pytest.skip("enable_nvidia is false: the container toolkit is not installed")
    with host.sudo():
        assert host.run("nvidia-container-cli info").rc == 0
        if host.exists("docker"):
            assert "nvidia" in host.check_output("docker info --format '{{json .Runtimes}}'")
