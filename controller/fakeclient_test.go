package controller

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/controller/internal/fakeapi"
)

// fakeClient is fakeapi.Client: the fake client the controller's unit
// tests share.
func fakeClient(t *testing.T, objs ...client.Object) client.Client { return fakeapi.Client(t, objs...) }
