// Command ociindex writes the image index of a multi-platform image into
// an OCI image layout, for scripts/images.sh (tools/internal/ociindex says
// why a program of our own):
//
//	ociindex combine LAYOUT TAG PLATFORM=REF...
//	    an image index of the image manifests named REF in the layout, each
//	    for its PLATFORM (OS/ARCH[/VARIANT], checked against the image's
//	    config), named TAG in the layout; prints its digest
//	ociindex digest LAYOUT REF
//	    prints the digest of the manifest or index named REF
package main

import (
	"os"

	"hostpath.dev/e2e/framework/cli"
	"hostpath.dev/tools/internal/ociindex"
)

func main() {
	cli.Main("ociindex", ociindex.Usage, ociindex.Commands(os.Stdout))
}
