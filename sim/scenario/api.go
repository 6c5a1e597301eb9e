package scenario

import (
	"reflect"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// The scenario format uses some of the API's own types (a pool's
// failurePolicy, karpenter and windows). Their enums and constraints are
// kubebuilder markers, which reflection cannot see; these two tables state
// them once, in the scenario types' tag language, and TestAPIRulesMatchCRD
// holds them to the generated CRD.

// apiEnums are the values of the API's enum types.
var apiEnums = map[reflect.Type][]string{
	reflect.TypeFor[v1alpha1.FailurePolicyAction](): {string(v1alpha1.FailureHalt), string(v1alpha1.FailureRollback)},
	reflect.TypeFor[v1alpha1.Weekday]():             {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"},
}

// apiTags are extra struct tags (required, pattern, minimum, ...) of the
// API's fields, by type and Go field name. The CRD states the
// MaintenanceWindow rules in CEL; validate.go checks the duration's range.
var apiTags = map[reflect.Type]map[string]reflect.StructTag{
	reflect.TypeFor[v1alpha1.MaintenanceWindow](): {
		"Start":    `required:"true" pattern:"timeOfDay"`,
		"Duration": `required:"true"`,
	},
	reflect.TypeFor[v1alpha1.FailurePolicy](): {
		"MaxFailures": `minimum:"1"`,
	},
	reflect.TypeFor[v1alpha1.RolloutSpec](): {
		"MaxStaging": `minimum:"0"`,
	},
}
