// Command smallbinary is what the image tests put in an image instead of the operator:
// a static binary that links a few modules, so the image, its SBOM and its
// reproducibility are checked without compiling and compressing the operator (about
// 70 MB per platform) on every test run. `make image` builds the operator itself.
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

func main() {
	out, err := yaml.Marshal(map[string]string{"binary": "smallbinary"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}
