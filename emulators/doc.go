// Package emulators starts, waits for, resets and stops the Google Cloud CLI's Firestore and
// Pub/Sub emulators on free loopback ports, so that `hangar dev` and the tests run against the
// real emulators rather than fakes.
//
// Each emulator is a gcloud Python process with a Java child; both run in a process group of
// their own so that Stop can end the whole group and never leaves a listener behind, and a
// watchdog ends the group when this process dies without stopping it. Exec wraps
// a command (`make test`) in one emulator pair and hands their addresses down through the
// FIRESTORE_EMULATOR_HOST and PUBSUB_EMULATOR_HOST variables the Google client libraries read;
// nested runs reuse that pair instead of starting another.
package emulators
