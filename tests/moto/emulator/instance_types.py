"""EC2 instance types' gaps, for the GPU and Trainium types forge lays out EFA for:
  * DescribeInstanceTypes: the network cards, EFA interfaces, GPUs, Neuron devices and
    architectures of the types in ACCELERATED, as AWS's documentation and the VPC CNI's limits
    table give them. moto 5.2.5's data has every one but p6e-gb200.36xlarge, which is made here
    (from p6-b300's record: the fields the facts do not name are approximate), and lacks
    trn2u's NeuronInfo; a type's other fields are moto's. The first C - E network cards of a
    type with C cards and E EFA interfaces take ENA only (InterfaceTypes ["interface"]):
    p6-b300's card 0;
  * DescribeInstanceTypeOfferings: the types in ACCELERATED that moto does not offer in
    us-west-2 (trn2, trn2u, p6e-gb200) offered in NEW_ZONES, by zone name and zone id;
  * `interface_problem`: what EC2 answers a launch whose network interfaces the type cannot
    take (EFA on a card or type without it, an EFA-only primary, a card or device index out of
    range, two interfaces at one card and device, more EFA interfaces than the type has); EKS
    node groups fail with it (eks.py);
  * `devices` and `arch`: a type's GPUs, Neuron devices and Kubernetes architecture, for the
    Nodes a node group publishes (eks.py).
"""

import copy

from moto.ec2.models import instance_types as moto_types
from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

INSTANCE_TYPES = moto_types.INSTANCE_TYPES
EFA_KINDS = ("efa", "efa-only")


def cards(count, interfaces):
    """`count` network cards taking `interfaces` each (an int, or a function of the card's index;
    None: as moto has them)."""
    return [interfaces(i) if callable(interfaces) else interfaces for i in range(count)]


# type: (MaximumNetworkInterfaces of each network card, MaximumEfaInterfaces, GPUs, Neuron
# devices, architecture).
ACCELERATED = {
    "p4d.24xlarge": (cards(4, 15), 4, 8, 0, "x86_64"),
    "p4de.24xlarge": (cards(4, 15), 4, 8, 0, "x86_64"),
    "p5.48xlarge": (cards(32, 2), 32, 8, 0, "x86_64"),
    "p5e.48xlarge": (cards(32, 2), 32, 8, 0, "x86_64"),
    "p5en.48xlarge": (cards(16, 4), 16, 8, 0, "x86_64"),
    "p6-b200.48xlarge": (cards(8, 4), 8, 8, 0, "x86_64"),
    "p6-b300.48xlarge": (cards(17, 4), 16, 8, 0, "x86_64"),
    "p6e-gb200.36xlarge": (cards(17, lambda i: 1 if i % 2 else 2), 17, 4, 0, "arm64"),
    "trn1.32xlarge": (cards(8, None), 8, 0, 16, "x86_64"),
    "trn1n.32xlarge": (cards(16, None), 16, 0, 16, "x86_64"),
    "trn2.48xlarge": (cards(16, 2), 16, 0, 16, "x86_64"),
    "trn2u.48xlarge": (cards(16, 2), 16, 0, 16, "x86_64"),
}
# Where the types moto does not offer in us-west-2 are offered (forge's tests use 2a and 2b).
NEW_ZONES = ("us-west-2a", "us-west-2b", "us-west-2d")


def gb200_record():
    """p6e-gb200.36xlarge, which moto lacks: p6-b300's record with GB200's processors (Grace,
    arm64), vCPUs, memory, GPUs and storage; its network cards are set by `correct`."""
    record = copy.deepcopy(INSTANCE_TYPES["p6-b300.48xlarge"])
    record.update({
        "InstanceType": "p6e-gb200.36xlarge",
        "ProcessorInfo": {"Manufacturer": "NVIDIA", "SupportedArchitectures": ["arm64"]},
        "VCpuInfo": {"DefaultVCpus": 144, "DefaultCores": 144, "DefaultThreadsPerCore": 1, "ValidCores": [144], "ValidThreadsPerCore": [1]},
        "MemoryInfo": {"SizeInMiB": 960 * 1024},
        "GpuInfo": {"Gpus": [{"Name": "GB200", "Manufacturer": "NVIDIA", "Count": 4, "LogicalGpuCount": 4, "GpuPartitionSize": 1.0,
                              "MemoryInfo": {"SizeInMiB": 185 * 1024}, "Workloads": ["ml-ai"]}], "TotalGpuMemoryInMiB": 4 * 185 * 1024},
        "InstanceStorageInfo": {"Disks": [{"Count": 3, "SizeInGB": 7500, "Type": "ssd"}], "NvmeSupport": "required", "EncryptionSupport": "required", "TotalSizeInGB": 22500},
        "SupportedBootModes": ["uefi"],
        "SupportedUsageClasses": ["capacity-block"],
    })
    network = record["NetworkInfo"]
    network["NetworkPerformance"] = "1600 Gigabit"
    for card in network["NetworkCards"]:
        card.update(NetworkPerformance="100 Gigabit", BaselineBandwidthInGbps=100.0, PeakBandwidthInGbps=100.0)
    return record


def counted(info, devices_key, count):
    """`info` (GpuInfo, NeuronInfo) with `count` devices in all, its first device's kind."""
    devices = info[devices_key]
    if sum(d.get("Count", 0) for d in devices) != count:
        devices[1:] = []
        devices[0]["Count"] = count
        if "LogicalGpuCount" in devices[0]:
            devices[0]["LogicalGpuCount"] = count


def correct(name, per_card, efa, gpus, neuron, arch):
    """The type's record as the facts have it, moto's other fields kept."""
    record = INSTANCE_TYPES.get(name) or gb200_record()
    network = record["NetworkInfo"]
    given = {c["NetworkCardIndex"]: c for c in network.get("NetworkCards", [])}
    template = next(iter(given.values()))
    ena_only = len(per_card) - efa
    network_cards = []
    for i, interfaces in enumerate(per_card):
        card = given.get(i) or {**copy.deepcopy(template), "NetworkCardIndex": i}
        if interfaces is not None:
            card["MaximumNetworkInterfaces"] = interfaces
        card["InterfaceTypes"] = ["interface"] if i < ena_only else ["interface", "efa", "efa-only"]
        network_cards.append(card)
    network.update(MaximumNetworkCards=len(per_card), NetworkCards=network_cards, EfaSupported=efa > 0, EfaInfo={"MaximumEfaInterfaces": efa},
                   MaximumNetworkInterfaces=sum(c["MaximumNetworkInterfaces"] for c in network_cards))
    if gpus:
        counted(record["GpuInfo"], "Gpus", gpus)
    if neuron:
        if "NeuronInfo" not in record:  # trn2u: trn2's Trainium2 devices
            record["NeuronInfo"] = copy.deepcopy(INSTANCE_TYPES["trn2.48xlarge"]["NeuronInfo"])
        counted(record["NeuronInfo"], "NeuronDevices", neuron)
    record["ProcessorInfo"]["SupportedArchitectures"] = [arch]
    INSTANCE_TYPES[name] = record


def offer(name, region, zones):
    """Offers the type in the region and `zones` (by name and by id) unless moto already does."""
    offerings = moto_types.INSTANCE_TYPE_OFFERINGS
    if any(o["InstanceType"] == name for o in offerings["region"].get(region, [])):
        return
    ids = {z.name: z.zone_id for z in RegionsAndZonesBackend.zones[region]}
    offerings["region"].setdefault(region, []).append({"InstanceType": name, "Location": region, "LocationType": "region"})
    for zone in zones:
        offerings["availability-zone"].setdefault(region, []).append({"InstanceType": name, "Location": zone, "LocationType": "availability-zone"})
        offerings["availability-zone-id"].setdefault(region, []).append({"InstanceType": name, "Location": ids[zone], "LocationType": "availability-zone-id"})


for _name, _facts in ACCELERATED.items():
    correct(_name, *_facts)
    offer(_name, "us-west-2", NEW_ZONES)
# moto's backends read the types from a list made when it was imported.
moto_types.InstanceTypeBackend.instance_types = [moto_types.InstanceType(name) for name in INSTANCE_TYPES]


# --- what nodes and launches read --------------------------------------------------------------

def devices(name):
    """(GPUs, Neuron devices) of a type; (0, 0) for one EC2 does not know."""
    record = INSTANCE_TYPES.get(name) or {}
    gpus = sum(g.get("Count", 0) for g in (record.get("GpuInfo") or {}).get("Gpus", []))
    neuron = sum(d.get("Count", 0) for d in (record.get("NeuronInfo") or {}).get("NeuronDevices", []))
    return gpus, neuron


def arch(name):
    """The type's architecture as Kubernetes names it (kubernetes.io/arch)."""
    architectures = ((INSTANCE_TYPES.get(name) or {}).get("ProcessorInfo") or {}).get("SupportedArchitectures") or ["x86_64"]
    return "arm64" if "arm64" in architectures else "amd64"


def efa_interfaces(interfaces):
    """How many EFA devices a launch's network interfaces give an instance."""
    return sum((i.get("InterfaceType") or "interface") in EFA_KINDS for i in interfaces or [])


def _index(value):
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def interface_problem(name, interfaces):
    """What EC2 answers a launch of type `name` with these network interfaces (a launch
    template's NetworkInterfaces): (error code, message), or None if the type takes them (or
    EC2 data does not know the type)."""
    record = INSTANCE_TYPES.get(name)
    if record is None or not interfaces:
        return None
    network = record.get("NetworkInfo") or {}
    by_index = {c["NetworkCardIndex"]: c for c in network.get("NetworkCards", [])}
    card_count = network.get("MaximumNetworkCards") or max(len(by_index), 1)
    efa_supported = network.get("EfaSupported", False)
    seen = set()
    for interface in interfaces:
        card, device = _index(interface.get("NetworkCardIndex")), _index(interface.get("DeviceIndex"))
        kind = interface.get("InterfaceType") or "interface"
        where = f"network card index {card}, device index {device}"
        if card >= card_count:
            return ("InvalidParameterValue", f"The specified network card index '{card}' is not valid for instance type {name}, which has {card_count} network "
                    f"card{'s' if card_count != 1 else ''}. Specify a number from 0 to {card_count - 1}, and try again.")
        if (card, device) in seen:
            return ("InvalidParameterValue", f"Each network interface requires a unique combination of network card index and device index; "
                    f"{where} is specified more than once.")
        seen.add((card, device))
        if kind == "efa-only" and (card, device) == (0, 0):
            return ("InvalidParameterCombination", "An EFA-only network interface cannot be the primary network interface (network card index 0, device index 0): "
                    "the primary network interface must have an IP address. Specify interface type 'interface' or 'efa' for it.")
        if kind in EFA_KINDS and not efa_supported:
            return ("InvalidParameterCombination", f"The instance type {name} does not support Elastic Fabric Adapter (EFA); interface type '{kind}' "
                    f"is not supported at {where}.")
        supported = (by_index.get(card) or {}).get("InterfaceTypes") or ["interface", *EFA_KINDS]
        if kind in EFA_KINDS and kind not in supported:
            return ("InvalidParameterCombination", f"The network card at network card index {card} of instance type {name} does not support interface type "
                    f"'{kind}' (it supports {', '.join(repr(t) for t in supported)} only); specified at {where}.")
        most = (by_index.get(card) or {}).get("MaximumNetworkInterfaces")
        if most is not None and device >= most:
            return ("InvalidParameterValue", f"The specified number '{device}' for the device index exceeds the maximum number of network interfaces supported by "
                    f"the network card at network card index {card}. The maximum devices for this network card is {most}. Specify a number from 0 to {most - 1}, and try again.")
    for card, card_info in sorted(by_index.items()):
        on_card = sum(_index(i.get("NetworkCardIndex")) == card for i in interfaces)
        most = card_info.get("MaximumNetworkInterfaces")
        if most is not None and on_card > most:
            return ("InvalidParameterCombination", f"The network card at network card index {card} of instance type {name} supports at most {most} network "
                    f"interface{'s' if most != 1 else ''}; {on_card} are specified.")
    efa = efa_interfaces(interfaces)
    most_efa = (network.get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0)
    if efa_supported and efa > most_efa:
        return ("InvalidParameterCombination", f"The instance type {name} supports at most {most_efa} EFA interfaces; {efa} are specified.")
    return None
