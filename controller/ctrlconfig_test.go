package controller_test

import (
	"go.uber.org/zap/zapcore"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
)

type zapLevelT = zapcore.Level

// ctrlConfig lets several managers in one process register controllers
// of the same names (one manager per test).
func ctrlConfig() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true)}
}
