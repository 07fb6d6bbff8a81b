package v1alpha2

// ReservedEnv lists the spec.env names the API server rejects (the CRD's
// rule on spec.env, kept equal to this list by a test): release 1.13's
// reserved names, read by the runtime's server or by the buildless Pod's
// start script.
func ReservedEnv() []string {
	return []string{"FUNC_RUNTIME", "FUNC_HANDLER", "FUNC_HANDLER_SOURCE", "FUNC_HANDLER_DEPENDENCIES",
		"FUNC_PORT", "MOD_NAME", "NODE_PATH", "PYTHONPATH"}
}
