package controllers

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/utils/ptr"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
)

// What a ShardPool's objects are made of: the StatefulSet that runs `pmx shard` as the chart's
// shard StatefulSet does (charts/pmx/templates/shard-statefulset.yaml: the same container, flags,
// environment, ports, probes and security contexts), its headless Service and its
// PodDisruptionBudget, each as an apply configuration holding only the fields the operator sets
// (server-side apply, ShardPoolReconciler.apply).

// The ports a shard pod serves on: the internal API with /healthz and /readyz, and /metrics.
const (
	shardPort        = 8090
	shardMetricsPort = 9090
)

// shardPoolSelector selects a pool's pods: the label pmx.dev/shard-pool with the shard component,
// never the chart's instance label, so that the chart's own shard StatefulSet, PodDisruptionBudget
// and Services select none of a pool's pods.
func shardPoolSelector(pool *pmxv1.ShardPool) map[string]string {
	return map[string]string{"app.kubernetes.io/component": "shard", pmxv1.LabelShardPool: pool.Name}
}

// shardPoolLabels are the labels of a pool's objects and pods.
func shardPoolLabels(pool *pmxv1.ShardPool) map[string]string {
	l := shardPoolSelector(pool)
	l["app.kubernetes.io/name"] = "pmx"
	l["app.kubernetes.io/managed-by"] = "pmx-operator"
	return l
}

// shardName is the name a pool's shard of an ordinal registers under: its pod's.
func shardName(pool *pmxv1.ShardPool, ordinal int32) string {
	return pmxv1.ShardPoolStatefulSetName(pool.Name) + "-" + strconv.Itoa(int(ordinal))
}

// shardNames are the names of a pool's shards of the ordinals from up to (not included) to.
func shardNames(pool *pmxv1.ShardPool, from, to int32) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, shardName(pool, i))
	}
	return out
}

// shardOrdinal is the ordinal of a pool's shard, from its name; ok is false for a name that is
// not one of the pool's.
func shardOrdinal(pool *pmxv1.ShardPool, name string) (ordinal int32, ok bool) {
	rest, ok := strings.CutPrefix(name, pmxv1.ShardPoolStatefulSetName(pool.Name)+"-")
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	if err != nil || n < 0 {
		return 0, false
	}
	return int32(n), true
}

// ownerReference makes the pool its objects' controller, so that they are deleted with it.
func ownerReference(pool *pmxv1.ShardPool) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().WithAPIVersion(pmxv1.GroupVersion.String()).WithKind("ShardPool").
		WithName(pool.Name).WithUID(pool.UID).WithController(true).WithBlockOwnerDeletion(true)
}

// shardStatefulSet is the StatefulSet that runs a pool's shards, with replicas pods.
func shardStatefulSet(pool *pmxv1.ShardPool, replicas int32) (*appsv1ac.StatefulSetApplyConfiguration, error) {
	name := pmxv1.ShardPoolStatefulSetName(pool.Name)
	typed := shardPodTemplate(pool)
	// The pod template holds the pool's own Kubernetes types (affinity, tolerations, ...), which
	// have the apply configuration's JSON: converted whole, only the fields they set are applied.
	raw, err := json.Marshal(typed)
	if err != nil {
		return nil, err
	}
	var template corev1ac.PodTemplateSpecApplyConfiguration
	if err := json.Unmarshal(raw, &template); err != nil {
		return nil, fmt.Errorf("while making the pod template of shard pool %s: %w", pool.Name, err)
	}
	return appsv1ac.StatefulSet(name, pool.Namespace).
		WithLabels(shardPoolLabels(pool)).
		WithOwnerReferences(ownerReference(pool)).
		WithSpec(appsv1ac.StatefulSetSpec().
			WithReplicas(replicas).
			WithServiceName(name).
			// The shards keep no state of their own: they start, and stop, in parallel.
			WithPodManagementPolicy(appsv1.ParallelPodManagement).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(shardPoolSelector(pool))).
			WithTemplate(&template)), nil
}

// The security contexts of the chart's defaults (values.yaml's podSecurityContext and
// securityContext), which pass the "restricted" Pod Security Standard: pmx is one static binary
// that writes nothing to disk.
func defaultPodSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
}

func defaultSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532),
		ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
}

// ShardPoolPodTemplate is the pod template of a pool's shards, as the operator's StatefulSet of the
// pool carries it: the chart's tests check the pods of the ShardPool it renders by it, as they
// check the chart's own.
func ShardPoolPodTemplate(pool *pmxv1.ShardPool) corev1.PodTemplateSpec {
	return shardPodTemplate(pool)
}

// shardPodTemplate is the pod of one shard, as the chart's shard StatefulSet makes it.
func shardPodTemplate(pool *pmxv1.ShardPool) corev1.PodTemplateSpec {
	spec := &pool.Spec
	labels, annotations := map[string]string{}, map[string]string(nil)
	if md := spec.PodMetadata; md != nil {
		maps.Copy(labels, md.Labels)
		annotations = md.Annotations
	}
	maps.Copy(labels, shardPoolLabels(pool))
	podSC, sc := spec.PodSecurityContext, spec.SecurityContext
	if podSC == nil {
		podSC = defaultPodSecurityContext()
	}
	if sc == nil {
		sc = defaultSecurityContext()
	}
	fieldEnv := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	secretEnv := func(name string, key corev1.SecretKeySelector) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &key}}
	}
	env := []corev1.EnvVar{
		// The shard registers under its pod's name, <pool>-shard-<ordinal>, which the pool's
		// reconciler reads its shards in Postgres by.
		fieldEnv("POD_NAME", "metadata.name"),
		{Name: "PMX_SHARD_NAME", Value: "$(POD_NAME)"},
		// The pod's own IP, which the fronts reach it at: a DNS name can answer, for a few seconds
		// after a restart, the address of the pod before it.
		fieldEnv("POD_IP", "status.podIP"),
		{Name: "PMX_ADVERTISE_ADDRESS", Value: "$(POD_IP)"},
		// The pool it registers in, which the operator places markets by (package placement):
		// an environment variable, which a release before --pool ignores.
		{Name: "PMX_SHARD_POOL", Value: pool.Name},
		secretEnv("PMX_DATABASE_URL", spec.DatabaseURL),
		secretEnv("PMX_INTERNAL_TOKEN", spec.InternalToken),
	}
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http")}},
			PeriodSeconds: period, FailureThreshold: failures}
	}
	container := corev1.Container{
		Name:            "shard",
		Image:           spec.Image,
		ImagePullPolicy: spec.ImagePullPolicy,
		Args: append([]string{"shard", "--addr=:" + strconv.Itoa(shardPort), "--metrics-addr=:" + strconv.Itoa(shardMetricsPort)},
			spec.Args...),
		Env: append(env, spec.Env...),
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: shardPort, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: shardMetricsPort, Protocol: corev1.ProtocolTCP}},
		StartupProbe:    probe("/healthz", 2, 30),
		LivenessProbe:   probe("/healthz", 10, 0),
		ReadinessProbe:  probe("/readyz", 5, 0),
		Resources:       spec.Resources,
		SecurityContext: sc,
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			// Shards do not talk to Kubernetes.
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			ServiceAccountName:           spec.ServiceAccountName,
			// On SIGTERM a shard answers the orders in flight and hands what it still owns over.
			TerminationGracePeriodSeconds: ptr.To(ptr.Deref(spec.TerminationGracePeriodSeconds, pmxv1.DefaultShardPoolGracePeriod)),
			ImagePullSecrets:              spec.ImagePullSecrets,
			SecurityContext:               podSC,
			PriorityClassName:             spec.PriorityClassName,
			NodeSelector:                  spec.NodeSelector,
			Tolerations:                   spec.Tolerations,
			Affinity:                      spec.Affinity,
			TopologySpreadConstraints:     spec.TopologySpreadConstraints,
			Containers:                    []corev1.Container{container},
		},
	}
}

// shardService is the pool's headless Service, the StatefulSet's governing Service: every shard
// pod gets the DNS name <pod>.<pool>-shard.<namespace>.svc, not-ready pods included. The fronts do
// not use it (the shards advertise their IPs in Postgres); it names the pods, and its metrics port
// lists every shard's /metrics.
func shardService(pool *pmxv1.ShardPool) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(pmxv1.ShardPoolStatefulSetName(pool.Name), pool.Namespace).
		WithLabels(shardPoolLabels(pool)).
		WithOwnerReferences(ownerReference(pool)).
		WithSpec(corev1ac.ServiceSpec().
			WithClusterIP(corev1.ClusterIPNone).
			WithPublishNotReadyAddresses(true).
			WithSelector(shardPoolSelector(pool)).
			WithPorts(
				corev1ac.ServicePort().WithName("http").WithProtocol(corev1.ProtocolTCP).WithPort(shardPort).WithTargetPort(intstr.FromString("http")),
				corev1ac.ServicePort().WithName("metrics").WithProtocol(corev1.ProtocolTCP).WithPort(shardMetricsPort).WithTargetPort(intstr.FromString("metrics"))))
}

// shardDisruptionBudget is the pool's PodDisruptionBudget: minAvailable when the policy gives it,
// otherwise maxUnavailable (1 by default).
func shardDisruptionBudget(pool *pmxv1.ShardPool) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	spec := policyv1ac.PodDisruptionBudgetSpec().WithSelector(metav1ac.LabelSelector().WithMatchLabels(shardPoolSelector(pool)))
	policy := ptr.Deref(pool.Spec.PodDisruptionBudget, pmxv1.ShardPoolDisruptionBudget{})
	switch {
	case policy.MinAvailable != nil:
		spec.WithMinAvailable(*policy.MinAvailable)
	case policy.MaxUnavailable != nil:
		spec.WithMaxUnavailable(*policy.MaxUnavailable)
	default:
		spec.WithMaxUnavailable(intstr.FromInt32(1))
	}
	return policyv1ac.PodDisruptionBudget(pmxv1.ShardPoolStatefulSetName(pool.Name), pool.Namespace).
		WithLabels(shardPoolLabels(pool)).
		WithOwnerReferences(ownerReference(pool)).
		WithSpec(spec)
}
