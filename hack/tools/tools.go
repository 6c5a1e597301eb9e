//go:build tools

// Package tools pins the binaries that the Makefile builds into bin/.
package tools

import (
	_ "github.com/google/go-containerregistry/cmd/crane"
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
