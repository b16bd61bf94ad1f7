//go:build tools

// Package tools pins the original discovery service so that the interop tests
// build it from the module proxy at this exact version.
package tools

import _ "github.com/siderolabs/discovery-service/cmd/discovery-service"
