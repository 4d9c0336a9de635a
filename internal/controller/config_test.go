package controller

import (
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
)

// controllerConfig lets tests start several managers in one process (controller names
// are otherwise unique per process).
func controllerConfig() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true)}
}
