// Command nftflush is what an attacker inside a sandbox runs to lift its egress capture: it
// flushes the namespace's nftables ruleset and prints the outcome.
package main

import (
	"fmt"
	"os"

	"github.com/google/nftables"
)

func main() {
	c, err := nftables.New()
	if err == nil {
		c.FlushRuleset()
		err = c.Flush()
	}
	if err != nil {
		fmt.Println("refused:", err)
		os.Exit(1)
	}
	fmt.Println("flushed")
}
