package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// LabelShardPool names the ShardPool whose StatefulSet runs a shard pod; the operator puts it on
// the pool's StatefulSet, Service, PodDisruptionBudget and pods, and selects the pods by it.
const LabelShardPool = GroupName + "/shard-pool"

// The defaults of a ShardPool's spec, which the CRD applies (replicas) or the operator fills in.
const (
	DefaultShardPoolReplicas = 2
	// DefaultShardPoolGracePeriod is the shard pods' terminationGracePeriodSeconds: on SIGTERM a
	// shard answers the orders in flight and hands what it still owns to the other shards.
	DefaultShardPoolGracePeriod = 30
	// MaxShardPoolNameLength keeps the pool's StatefulSet, <pool>-shard, within the 52 characters a
	// StatefulSet's name may have for its pods' controller-revision-hash label to fit in 63.
	MaxShardPoolNameLength = 52 - len("-shard")
)

// ShardPoolStatefulSetName is the name of the StatefulSet (and of its headless Service and
// PodDisruptionBudget) that runs a pool's shards; each shard pod, and so each shard as it registers
// in Postgres, is named <pool>-shard-<ordinal>.
func ShardPoolStatefulSetName(pool string) string { return pool + "-shard" }

// ShardPoolPodMetadata is what the pool's pods carry besides what the operator sets.
type ShardPoolPodMetadata struct {
	// Labels added to each shard pod. The operator's own (app.kubernetes.io/name, component,
	// managed-by and pmx.dev/shard-pool) win over these.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations added to each shard pod. A change rolls the pods, one at a time, each handing
	// its markets over as it stops (a checksum of the shards' configuration rolls them when it
	// changes).
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ShardPoolDisruptionBudget is the policy of the PodDisruptionBudget the operator makes for the
// pool's pods: how many voluntary evictions (a node drain) may take at once. Each evicted shard
// hands its markets to the others before it stops.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.maxUnavailable) && has(self.minAvailable))",message="set at most one of maxUnavailable and minAvailable"
type ShardPoolDisruptionBudget struct {
	// MaxUnavailable is how many shard pods (or what percentage, "25%") may be evicted at once.
	// Defaults to 1 when minAvailable is unset. "100%" lets every eviction through.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="maxUnavailable must be a number of pods (0 or more) or a percentage such as 25%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// MinAvailable is how many shard pods (or what percentage) must stay up through evictions;
	// when set, it replaces maxUnavailable.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="minAvailable must be a number of pods (0 or more) or a percentage such as 75%"
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`
}

// ShardPoolSpec is how many shards a pool runs and how its pods run `pmx shard`: as the chart's
// shard StatefulSet runs them, with what differs between clusters left to the spec.
type ShardPoolSpec struct {
	// Replicas is the number of shards (pods) the pool runs; the scale subresource's, so that
	// `kubectl scale shardpool/NAME --replicas=N` and a HorizontalPodAutoscaler change it. A
	// scale-down first hands the markets of the shards that go (the highest ordinals) to the
	// others by the planned handoff, then lowers the StatefulSet's replicas. Defaults to 2.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Replicas *int32 `json:"replicas,omitempty"`

	// MaxDedicatedShards is how many shards the operator may run beyond replicas for the pool's
	// dedicated markets and events (spec.placement: Dedicated): one each, so that the shared
	// markets keep replicas shards. Beyond it a dedicated market takes a free shard of the
	// replicas if there is one, and otherwise shares a shard, with its Dedicated condition False
	// (NoFreeShard). Defaults to 0: the pool never grows by itself.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	MaxDedicatedShards int32 `json:"maxDedicatedShards,omitempty"`

	// Image is the pmx image the shards run (`pmx shard`), e.g. registry.example.com/pmx:1.0.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image"`

	// ImagePullPolicy of the shard container: Always, IfNotPresent or Never. Defaults to
	// Kubernetes' (Always for a :latest tag or none, else IfNotPresent).
	// +optional
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// ImagePullSecrets names Secrets, in the pool's namespace, holding registry credentials.
	// +optional
	// +listType=atomic
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// DatabaseURL is the key of a Secret, in the pool's namespace, holding the exchange's Postgres
	// URL (the shards' $PMX_DATABASE_URL), e.g. the chart's <release>-pmx-postgres, key
	// database-url.
	// +required
	DatabaseURL corev1.SecretKeySelector `json:"databaseURL"`

	// InternalToken is the key of a Secret, in the pool's namespace, holding the internal token
	// the shards share with the fronts and the operator ($PMX_INTERNAL_TOKEN), e.g. the chart's
	// <release>-pmx-tokens, key internal-token.
	// +required
	InternalToken corev1.SecretKeySelector `json:"internalToken"`

	// Args are added to `pmx shard`'s own (--addr=:8090 --metrics-addr=:9090), e.g.
	// --log-level=debug, --shards=4 or --keep-events. The flags the operator sets — the addresses,
	// the name, the pool, the database and the token — cannot be given here.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.exists(a, a.matches('^--?(addr|metrics-addr|name|pool|advertise-address|database-url|internal-token)(=.*)?$'))",message="args cannot set --addr, --metrics-addr, --name, --pool, --advertise-address, --database-url or --internal-token: the operator sets them"
	Args []string `json:"args,omitempty"`

	// Env is added to the shard container's environment. The variables the operator sets
	// (POD_NAME, POD_IP, PMX_SHARD_NAME, PMX_SHARD_POOL, PMX_ADVERTISE_ADDRESS, PMX_DATABASE_URL,
	// PMX_INTERNAL_TOKEN) cannot be given here.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="!self.exists(e, e.name in ['POD_NAME', 'POD_IP', 'PMX_SHARD_NAME', 'PMX_SHARD_POOL', 'PMX_ADVERTISE_ADDRESS', 'PMX_DATABASE_URL', 'PMX_INTERNAL_TOKEN'])",message="env cannot set POD_NAME, POD_IP, PMX_SHARD_NAME, PMX_SHARD_POOL, PMX_ADVERTISE_ADDRESS, PMX_DATABASE_URL or PMX_INTERNAL_TOKEN: the operator sets them"
	Env []corev1.EnvVar `json:"env,omitempty"`

	// Resources of the shard container. No CPU limit is advised: the matching loop is the
	// exchange's hot path, and `pmx shard` runs one matching loop per core it may use.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// NodeSelector of the shard pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations of the shard pods.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Affinity of the shard pods.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// TopologySpreadConstraints of the shard pods; their labelSelector may match the pool's pods
	// by the label pmx.dev/shard-pool.
	// +optional
	// +listType=atomic
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// PriorityClassName of the shard pods: a PriorityClass you create, so that a busy node
	// preempts or evicts other pods before the exchange's.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// ServiceAccountName the shard pods run as; its token is not mounted (shards do not talk to
	// Kubernetes). Defaults to the namespace's default ServiceAccount.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// PodSecurityContext of the shard pods. Defaults to the chart's: non-root as 65532, with the
	// RuntimeDefault seccomp profile.
	// +optional
	PodSecurityContext *corev1.PodSecurityContext `json:"podSecurityContext,omitempty"`

	// SecurityContext of the shard container. Defaults to the chart's, which passes the
	// "restricted" Pod Security Standard: non-root as 65532, a read-only root, no privilege
	// escalation, no capabilities, RuntimeDefault seccomp.
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`

	// TerminationGracePeriodSeconds of the shard pods: how long a stopping shard has to answer
	// the orders in flight and hand its markets over. Defaults to 30.
	// +optional
	// +kubebuilder:validation:Minimum=1
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// PodMetadata is the labels and annotations added to the shard pods.
	// +optional
	PodMetadata *ShardPoolPodMetadata `json:"podMetadata,omitempty"`

	// PodDisruptionBudget is the policy of the pool's PodDisruptionBudget. Defaults to
	// maxUnavailable 1.
	// +optional
	PodDisruptionBudget *ShardPoolDisruptionBudget `json:"podDisruptionBudget,omitempty"`
}

// ShardPoolConditionType names one of a ShardPool's status conditions.
type ShardPoolConditionType string

const (
	// ShardPoolReady is True when the pool's StatefulSet, Service and PodDisruptionBudget are as
	// the spec says and every shard it runs is ready and live (its heartbeat recent in Postgres).
	ShardPoolReady ShardPoolConditionType = "Ready"
	// ShardPoolDraining is True while shards that a scale-down or the pool's deletion removes still
	// own markets: the operator hands them to the other live shards before the shards go.
	ShardPoolDraining ShardPoolConditionType = "Draining"
)

// ShardPoolConditionReason is the machine-readable reason of a ShardPool condition.
type ShardPoolConditionReason string

const (
	// ReasonShardsReady: every shard of the pool is ready and live (Ready).
	ReasonShardsReady ShardPoolConditionReason = "ShardsReady"
	// ReasonProgressing: fewer shards are ready or live than the pool runs (Ready).
	ReasonProgressing ShardPoolConditionReason = "Progressing"
	// ReasonObjectTaken: the pool's StatefulSet, Service or PodDisruptionBudget name is held by an
	// object the pool does not control; the operator leaves it alone (Ready).
	ReasonObjectTaken ShardPoolConditionReason = "ObjectTaken"
	// ReasonOutsideNamespace: the pool is not in the namespace whose pools the operator runs
	// (pmx operator --shard-pool-namespace, its own by default); nothing is made for it (Ready).
	ReasonOutsideNamespace ShardPoolConditionReason = "OutsideNamespace"
	// ReasonApplyFailed: the StatefulSet, Service or PodDisruptionBudget could not be written;
	// the operator retries (Ready).
	ReasonApplyFailed ShardPoolConditionReason = "ApplyFailed"

	// ReasonHandingOver: shards that are to go are handing their markets to the other live
	// shards by the planned handoff; the StatefulSet keeps them until they own none (Draining).
	ReasonHandingOver ShardPoolConditionReason = "HandingOver"
	// ReasonNoShardToTakeOver: shards that are to go own markets, and no live shard outside them
	// can take them; they keep serving, and the scale-down or deletion waits (Draining).
	ReasonNoShardToTakeOver ShardPoolConditionReason = "NoShardToTakeOver"
	// ReasonNoShardLeaving: no shard that is to go owns a market (Draining False).
	ReasonNoShardLeaving ShardPoolConditionReason = "NoShardLeaving"
)

// ShardPoolStatus is what the operator last observed of the pool: its StatefulSet's pods and its
// shards as they are registered in Postgres.
type ShardPoolStatus struct {
	// Replicas is how many shard pods the pool's StatefulSet has, less the dedicatedShards added
	// for dedicated markets: the scale subresource's status.replicas, which spec.replicas sets.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// DedicatedShards is how many shards the operator runs beyond spec.replicas for the pool's
	// dedicated markets and events (at most spec.maxDedicatedShards); the StatefulSet runs
	// replicas + dedicatedShards pods.
	// +optional
	DedicatedShards int32 `json:"dedicatedShards,omitempty"`

	// ReadyReplicas is how many of them are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// LiveShards is how many of the pool's shards are live: registered in Postgres with a
	// heartbeat within the operator's --shard-ttl.
	// +optional
	LiveShards int32 `json:"liveShards,omitempty"`

	// Markets is how many OPEN markets the pool's live shards own.
	// +optional
	Markets int32 `json:"markets,omitempty"`

	// OrdersPerSecond is the orders per second the pool's live shards took over the last minute,
	// as each last reported it (every five heartbeats), rounded.
	// +optional
	OrdersPerSecond int64 `json:"ordersPerSecond,omitempty"`

	// Selector is the label selector of the pool's pods, for the scale subresource (a
	// HorizontalPodAutoscaler finds the pods' metrics by it).
	// +optional
	Selector string `json:"selector,omitempty"`

	// StatefulSet is the name of the StatefulSet that runs the pool's shards.
	// +optional
	StatefulSet string `json:"statefulSet,omitempty"`

	// DrainingShards are the shards the operator marked draining for a scale-down or the pool's
	// deletion and is handing the markets of, until the StatefulSet no longer runs them. A
	// scale-down undone before it completes (replicas raised again) takes them back.
	// +optional
	// +listType=atomic
	DrainingShards []string `json:"drainingShards,omitempty"`

	// Conditions of the pool: Ready (its objects applied, every shard ready and live) and Draining
	// (shards that are to go still own markets).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// ObservedGeneration is the metadata.generation of the spec that this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// ShardPool runs a set of matching shards: the operator reconciles it into a StatefulSet of
// `pmx shard` pods (<pool>-shard-0, -1, ...), their headless Service and a PodDisruptionBudget, all
// owned by the pool, and reports the shards it runs as Postgres sees them. Scaling it down (kubectl
// scale, a HorizontalPodAutoscaler) first hands the markets of the shards that go to the others by
// the planned handoff; deleting it does the same before its objects go.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:path=shardpools,singular=shardpool,scope=Namespaced,shortName=spool,categories=pmx
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 46",message="metadata.name of a ShardPool must be at most 46 characters (its StatefulSet, <name>-shard, must leave room for its pods' revision label)"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name of a ShardPool must start with a letter and hold only lower-case letters, digits and '-' (its Service is named after it)"
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`,description="Shards the pool is to run"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`,description="Shard pods ready"
// +kubebuilder:printcolumn:name="Live",type=integer,JSONPath=`.status.liveShards`,description="Shards live in Postgres (heartbeat within the TTL)"
// +kubebuilder:printcolumn:name="Dedicated",type=integer,JSONPath=`.status.dedicatedShards`,priority=1,description="Shards added for dedicated markets"
// +kubebuilder:printcolumn:name="Markets",type=integer,JSONPath=`.status.markets`,description="OPEN markets its live shards own"
// +kubebuilder:printcolumn:name="Orders/s",type=integer,JSONPath=`.status.ordersPerSecond`,description="Orders per second its shards took over the last minute"
// +kubebuilder:printcolumn:name="Draining",type=string,JSONPath=`.status.conditions[?(@.type=="Draining")].status`,description="True while shards that are to go hand their markets over"
// +kubebuilder:printcolumn:name="StatefulSet",type=string,JSONPath=`.status.statefulSet`,priority=1,description="The StatefulSet that runs its shards"
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`,priority=1,description="The pmx image its shards run"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ShardPool struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// Spec is how many shards the pool runs and how their pods run.
	// +required
	Spec ShardPoolSpec `json:"spec"`

	// Status is what the operator last observed.
	// +optional
	Status ShardPoolStatus `json:"status,omitzero"`
}

// ShardPoolList is a list of ShardPools.
//
// +kubebuilder:object:root=true
type ShardPoolList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []ShardPool `json:"items"`
}
