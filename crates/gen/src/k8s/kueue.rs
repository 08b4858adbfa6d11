//! Kueue's topology-aware scheduling (TAS): an annotation on the pod
//! template asks Kueue to place all of a workload's pods within one domain
//! of a node label, such as a GKE block (`cloud.google.com/gce-topology-block`)
//! or one host (`kubernetes.io/hostname`), as GKE's NCCL JobSets for A3
//! Ultra, A4 and A4X do ("with TAS enabled").

/// Where Kueue must or should place the pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    /// Every pod within one domain of this node label, or no admission.
    Required(String),
    /// Within one domain of this label if it fits, else as close as Kueue can.
    Preferred(String),
}

impl Topology {
    /// The pod template's annotation: its key and the level label.
    pub fn annotation(&self) -> (&'static str, &str) {
        match self {
            Topology::Required(level) => ("kueue.x-k8s.io/podset-required-topology", level),
            Topology::Preferred(level) => ("kueue.x-k8s.io/podset-preferred-topology", level),
        }
    }

    /// The flag that set it, for error lines.
    pub fn flag(&self) -> &'static str {
        match self {
            Topology::Required(_) => "--topology-required",
            Topology::Preferred(_) => "--topology-preferred",
        }
    }
}
