// Package e2e holds the tests that cross packages: the whole API served over real HTTP on
// 127.0.0.1 against the Firestore emulator, called the way outside clients call it.
package e2e
