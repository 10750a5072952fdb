package synth

// OSCFiles returns a minimal Gardener OperatingSystemConfig (name pool,
// namespace shoot, purpose reconcile) whose spec.files are files: YAML list
// items indented by two spaces ("  - path: /etc/x\n    content: ...\n").
func OSCFiles(files string) string {
	return "apiVersion: extensions.gardener.cloud/v1alpha1\nkind: OperatingSystemConfig\n" +
		"metadata: {name: pool, namespace: shoot}\nspec:\n  type: coreos\n  purpose: reconcile\n  files:\n" + files
}

// ImageRefFile is an OSCFiles item: file path (mode 0755) with the content
// of fileInImage inside image (Gardener content.imageRef).
func ImageRefFile(path, image, fileInImage string) string {
	return "  - path: " + path + "\n    permissions: 493\n    content:\n      imageRef: {image: " + image + ", filePathInImage: " + fileInImage + "}\n"
}
