package preflight

// Default returns the checks every run uses, in report order. Adding a
// check is one file implementing Check plus one line here.
func Default() []Check {
	return []Check{
		baseLayersCheck{},
		bootableCheck{},
		platformCheck{},
		versionCheck{},
		formatCheck{},
		layersCheck{},
		contentCheck{},
		secretsCheck{},
		unitsCheck{},
		usrOverrideCheck{},
		sizeCheck{},
	}
}
