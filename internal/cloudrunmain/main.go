// Command cloudrunmain is the main Google Cloud's Go buildpack generates for a function
// deployed from this module (`gcloud functions deploy --entry-point=X`): it imports the module
// for its init registrations and starts the Functions Framework, which serves the function named
// by FUNCTION_TARGET at "/". TestProductionParity builds it to run the functions as deployed.
package main

import (
	"log"
	"os"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	_ "github.com/hangar-dev/hangar"
)

func main() {
	port := "8080"
	if p := os.Getenv("PORT"); p != "" {
		port = p
	}
	// The buildpack's main listens on every interface unless LOCAL_ONLY=true.
	hostname := ""
	if os.Getenv("LOCAL_ONLY") == "true" {
		hostname = "127.0.0.1"
	}
	if err := funcframework.StartHostPort(hostname, port); err != nil {
		log.Fatalf("funcframework.StartHostPort: %v", err)
	}
}
