package apiserver

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// builtinGroup reports whether group is one of Kubernetes' own API groups
// (served by kube-apiserver itself) rather than a custom resource's: the
// core group, the unqualified groups and those under k8s.io.
func builtinGroup(group string) bool {
	switch group {
	case "", "apps", "batch", "policy", "autoscaling", "extensions":
		return true
	}
	return strings.HasSuffix(group, ".k8s.io") || group == "k8s.io"
}

// withGeneration are the built-in kinds whose objects have a
// metadata.generation: those whose kube-apiserver strategy sets it on
// create (v1.37, pkg/registry/*/strategy.go). The other built-in kinds,
// Node, ConfigMap, Namespace and Secret among them, keep it at 0; custom
// resources all have one.
var withGeneration = map[schema.GroupKind]bool{
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "apps", Kind: "DaemonSet"}:                                                true,
	{Group: "apps", Kind: "Deployment"}:                                               true,
	{Group: "apps", Kind: "ReplicaSet"}:                                               true,
	{Group: "apps", Kind: "StatefulSet"}:                                              true,
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}:                           true,
	{Group: "batch", Kind: "CronJob"}:                                                 true,
	{Group: "batch", Kind: "Job"}:                                                     true,
	{Kind: "Pod"}:                                                                     true,
	{Kind: "PodTemplate"}:                                                             true,
	{Kind: "ReplicationController"}:                                                   true,
	{Group: "discovery.k8s.io", Kind: "EndpointSlice"}:                                true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                       true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}:       true,
	{Group: "networking.k8s.io", Kind: "Ingress"}:                                     true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                true,
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}:                               true,
	{Group: "policy", Kind: "PodDisruptionBudget"}:                                    true,
	{Group: "resource.k8s.io", Kind: "DeviceClass"}:                                   true,
	{Group: "resource.k8s.io", Kind: "DeviceTaintRule"}:                               true,
	{Group: "resource.k8s.io", Kind: "ResourceSlice"}:                                 true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
}

// hasGeneration reports whether objects of gk have a metadata.generation.
func hasGeneration(gk schema.GroupKind) bool {
	return !builtinGroup(gk.Group) || withGeneration[gk]
}
