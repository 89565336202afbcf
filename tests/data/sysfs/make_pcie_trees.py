#!/usr/bin/env python3
"""Writes the PCIe/IOMMU sysfs trees the fingerprint's readers are tested on
(src/world/pcie_test.cpp). Run from this directory; the trees are committed.

Each tree has the shape of a real /sys: bus/pci/devices/<GPU> is a relative
link into devices/pci<dom:bus>/<root port>/<switch ports>/<GPU>, each bridge
has a `config` file (its PCI config space, 4096 bytes as root reads it, 64
as any other user does), and the GPU's iommu_group links into
kernel/iommu_groups/N with its `type`.

  pcie_acs_on    GPU behind a switch whose downstream port has ACS redirecting
                 (SrcValid, ReqRedir, CmplRedir, UpstreamFwd); IOMMU translating (DMA-FQ)
  pcie_acs_off   the same switch with ACS control cleared; IOMMU in passthrough
  pcie_not_root  the same, config spaces as a non-root user reads them; no IOMMU
  pcie_direct    the GPU directly on a root port; no IOMMU
"""
import os
import shutil
import struct

GPU = "0000:1b:00.0"
ROOT = "pci0000:16"
PATH_SWITCH = ["0000:16:01.0", "0000:17:00.0", "0000:18:08.0"]


def config(acs_control=None, readable=True):
    """A bridge's config space: an AER capability at 0x100, then ACS (when
    acs_control is not None) at 0x148."""
    space = bytearray(4096)
    space[0:4] = struct.pack("<HH", 0x10B5, 0x8796)  # vendor, device
    nxt = 0x148 if acs_control is not None else 0
    struct.pack_into("<I", space, 0x100, 0x0001 | (1 << 16) | (nxt << 20))
    if acs_control is not None:
        struct.pack_into("<I", space, 0x148, 0x000D | (1 << 16))
        struct.pack_into("<HH", space, 0x14C, 0x005F, acs_control)
    return bytes(space if readable else space[:64])


def tree(name, bridges, acs, readable, iommu_type):
    if os.path.exists(name):
        shutil.rmtree(name)
    dev = os.path.join(name, "devices", ROOT)
    for i, b in enumerate(bridges):
        dev = os.path.join(dev, b)
        os.makedirs(dev)
        # The root port [0] keeps ACS on, as most do: it is not a switch port.
        ctl = 0x1D if i == 0 else acs.get(b)
        with open(os.path.join(dev, "config"), "wb") as f:
            f.write(config(ctl, readable))
    gpu = os.path.join(dev, GPU)
    os.makedirs(gpu)
    with open(os.path.join(gpu, "config"), "wb") as f:
        f.write(config(None, readable))
    links = os.path.join(name, "bus", "pci", "devices")
    os.makedirs(links)
    os.symlink(os.path.relpath(gpu, links), os.path.join(links, GPU))
    if iommu_type:
        group = os.path.join(name, "kernel", "iommu_groups", "30")
        os.makedirs(group)
        with open(os.path.join(group, "type"), "w") as f:
            f.write(iommu_type + "\n")
        os.symlink(os.path.relpath(group, gpu), os.path.join(gpu, "iommu_group"))
        os.makedirs(os.path.join(name, "class", "iommu", "dmar0"))


tree("pcie_acs_on", PATH_SWITCH, {"0000:17:00.0": None, "0000:18:08.0": 0x1D}, True, "DMA-FQ")
tree("pcie_acs_off", PATH_SWITCH, {"0000:17:00.0": None, "0000:18:08.0": 0x0}, True, "identity")
tree("pcie_not_root", PATH_SWITCH, {"0000:17:00.0": None, "0000:18:08.0": 0x1D}, False, None)
tree("pcie_direct", PATH_SWITCH[:1], {}, True, None)
