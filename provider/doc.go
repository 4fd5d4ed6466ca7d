// Package provider is the Daytona sandbox-provider driver of the worker: it
// serves the Paperclip environment methods (validate, probe, acquire,
// realize, resume, release, destroy, stop) on top of the daytona client, the
// exec and sync packages and cleanup's ownership envelopes. It never speaks
// JSON-RPC frames or HTTP itself.
//
// The configuration layer lives in provider/config, labels.go and internal/jsvalue:
//
//   - config.Parse reads an environment config leniently, with the JavaScript
//     coercions of the TypeScript plugin (docs/behavior.md#config-parsing); Validate
//     and config.ValidateAndNormalize produce the reference error messages in the
//     reference order (docs/behavior.md#validation); Normalize produces normalizedConfig. Config
//     never prints its API key (fmt, slog, encoding/json all redact it).
//   - config.RuntimeCreateSource, config.ToTimeoutSeconds, config.ResolveTimeoutMs,
//     config.EffectiveAutoStopMinutes (the warm-window floor, docs/behavior.md#warm-window) and
//     config.StaleHandleThreshold (docs/behavior.md#stale-handle) are the small runtime rules.
//   - OwnershipLabels, CreationName and VerifyOwnershipLabels are the names
//     and labels that prove a sandbox is ours (docs/behavior.md#labels, docs/behavior.md#envelope).
//   - jsvalue.StableStringify, shell.Quote and config.AccountFingerprint must be bit-identical
//     with the reference (docs/behavior.md#small-functions, docs/behavior.md#envelope): sentinel tokens and fingerprints of
//     leases created by the TypeScript plugin are hashes of their output.
//
// Where the seeds define behaviour the published host lacks (docs/behavior.md#seed-requirements), the
// package follows the seeds; decisions the specs leave open are documented
// next to the code that makes them.
//
// # Lifecycle tests and the reference test titles
//
// The lifecycle titles of docs/behavior.md#reference-tests (the upstream plugin's
// test file) map to these tests of this package. FaultMatrix is
// TestFaultMatrix (faults_test.go), whose cases are named op/step/fault.
// Titles about interactive setup, templates, runner ingress and duplex
// channels (39–46, 138–142) are not listed: this worker does not implement
// those hooks. Where a title drives execute, a realize (same activity gate,
// same handle cache) stands in unless an execute test is named.
//
//	 8 normalizes config, API key fallback        TestValidateConfigNormalizesExactly, TestResolveAPIKeyAndFingerprint
//	 9 quota-safety interval defaults             TestQuotaSafetyDefaults
//	10 explicit 0 / -1 intervals kept             TestExplicitZeroAndMinusOneIntervals
//	11 defaults forwarded to create               TestReusableLifecycleRoundTrips (15/60/10080 on the sandbox)
//	12 slow create and setup inside the budget    FaultMatrix acquire/create/delay, acquire/workspace setup/delay
//	13 ownership journaled when setup outlasts    TestSetupHangAfterCreateJournalsObservedID, FaultMatrix acquire/workspace setup/hang
//	14 uncertain create, late result rejected     TestCreateHangSpendsBudgetAndReportsEnvelope, FaultMatrix acquire/create performed/hang
//	15 hung inline deletion keeps ownership       FaultMatrix acquire/inline delete after failed setup/hang
//	16 setup and inline deletion both reject      TestSetupAndInlineDeleteBothFailingKeepOwnership, FaultMatrix acquire/inline delete after failed setup/500
//	17 non-secret cleanup ownership               TestUncertainCreateNotVisibleIsReportedNotGuessed (envelopeOf: validated, no key)
//	18 SDK-added labels keep ownership            TestSDKAddedLabelsDoNotBreakOwnership
//	19 late-visible creation: observe, delete     TestCreateHangSpendsBudgetAndReportsEnvelope, TestFailedCreateHungLookupOrDeleteIsBounded
//	20 retry unresolved while not visible         TestFailedCreateRetryStaysUnresolvedWhileNotVisible
//	21 absence only after an observed id          TestCreateHangSpendsBudgetAndReportsEnvelope (third destroy)
//	22 observed id kept when delete ack is lost   TestFailedCreateLookupOrDeleteFailureIsReported/delete_acknowledgement_lost
//	23 retries fenced by company/account/labels   TestFailedCreateCleanupIsFenced
//	24 exact leftover deleted, create error kept  TestUncertainCreateIsFoundByNameAndDeleted, FaultMatrix acquire/create performed/500
//	25 mismatched label never deleted (×5)        TestFailedCreateNeverDeletesAMismatchedSandbox/paperclip-*
//	26 different name never deleted               TestFailedCreateNeverDeletesAMismatchedSandbox/name
//	27 not-found after uncertain create           TestUncertainCreateNotVisibleIsReportedNotGuessed, FaultMatrix acquire/create/500
//	28 lookup fails                               TestFailedCreateLookupOrDeleteFailureIsReported/lookup_fails
//	29 deletion fails                             TestFailedCreateLookupOrDeleteFailureIsReported/delete_fails
//	30 hung lookup bounded                        TestFailedCreateHungLookupOrDeleteIsBounded/lookup
//	31 hung deletion bounded                      TestFailedCreateHungLookupOrDeleteIsBounded/delete
//	32 distinct identities per attempt            TestConcurrentAttemptsUseDistinctIdentities, TestRetriedCreationOperationNeverMakesASecondSandbox
//	33 ambiguous or invalid config                TestValidateOrder, TestValidationMessagesExact
//	34 probe creates then deletes                 TestProbeCreatesChecksAndAlwaysDeletes, TestProbeNeverThrows
//	35 acquires a lease                           TestReusableLifecycleRoundTrips
//	36 no requested expiry, no provider ttl       TestNoRequestedExpiryMeansNoProviderCall
//	37 ttl at or before the requested expiry      TestRequestedExpiryIsSetAtOrBeforeTheDeadline, TestTTLMinutesSetAtCreationAndConfirmed
//	38 deadline under a minute: no expiry         TestRequestedExpiryUnderAMinuteGivesNoExpiry
//	47 image resources passed to create           TestResourcesAndSnapshotRules
//	48 snapshot drops runtime resources           TestResourcesAndSnapshotRules, TestRuntimeCreateSource
//	49 snapshot resources rejected (validation)   TestValidateEachRule
//	50 default creation rejects resources         TestResourcesAndSnapshotRules
//	51 requested resources in lease metadata      TestResourcesAndSnapshotRules, TestLeaseConfigMetadata
//	52 ephemeral run-bound verification (×6)      TestEphemeralResumePrecheckMakesNoProviderCall, TestResumeRejectsMismatchedSentinel
//	53 sentinel identity changes with resources   TestSentinelIdentityChangesWithResources
//	54 setup throws after create: deleted         TestSetupFailureDeletesInlineAndKeepsTheError, FaultMatrix acquire/workspace setup/500
//	55 sh fallback without bash                   TestShellFallsBackToSh (the emulator always has bash)
//	56 resume setup throws after start: kept      TestResumePreservesTheSandboxWhenSetupFailsAfterStart, FaultMatrix resume/sentinel/*
//	57 missing reusable lease expires             TestReusableLifecycleRoundTrips (resume after destroy)
//	58 resume when the sentinel matches           TestReusableLifecycleRoundTrips
//	59 confirmed missing container expires        TestResumeExpiresAConfirmedMissingContainerWithoutReplacingIt
//	60 opaque id matched literally (×2)           TestResumeMatchesTheOpaqueIDLiterally
//	61 unexplained unrecoverable error (×4)       TestResumePreservesAnUnexplainedUnrecoverableError
//	62 recoverable: provider recovery             TestResumeRecoversARecoverableError, TestResumeRecoversAMissingContainerReportMarkedRecoverable
//	63 fresh state disproves the cached loss      TestResumeReusesASandboxWhoseFreshStateDisprovesTheLoss
//	64 confirmation fails (timeout, 503)          TestResumePreservesTheLeaseWhenConfirmationFails
//	65 unknown error of the fresh read            TestResumePreservesAnUnknownErrorOfTheFreshRead
//	66 refreshed handle of another sandbox        TestResumeRejectsARefreshedHandleOfAnotherSandbox
//	67 typed not-found while confirming           TestResumeAcceptsNotFoundWhileConfirming
//	68 stalled confirmation bounded               TestResumePreservesTheLeaseWhenConfirmationFails/stalled_(hang)
//	69 sentinel mismatch expires                  TestResumeRejectsMismatchedSentinel
//	70 cached stopped handle refreshed            TestReleaseRefreshesACachedStoppedHandle
//	71 stop and delete both fail: no receipt      TestReusableStopFailureFallsBackToDelete
//	72 explicit stop retains even when it fails   TestStopFailureRetainsTheSandbox
//	73 reusable stops, ephemeral deletes          TestReusableLifecycleRoundTrips, TestEphemeralReleaseDeletesAndWaits
//	74 stop-and-retain preserves (stop fails ×2)  TestReleaseStopAndRetainBehavesLikeStop, TestStopFailureRetainsTheSandbox
//	75 auto-delete disabled and confirmed (×4)    TestStopDisablesAutoDeleteAndConfirmsItBeforeStopping, TestStopRetentionPolicyFailuresNeverStop
//	76 archiveOnRelease archives                  TestArchiveOnRelease
//	77 archive failure falls back to delete       TestArchiveFailureFallsBackToDelete
//	78 errored reusable stop fails: delete        TestReleaseFallsBackToDeleteWhenStoppingAnErroredReusableLeaseFails
//	79 healthy stop fails mid-call: delete        TestReleaseFallsBackToDeleteWhenAStopFailsMidCall, FaultMatrix release-reusable/stop/*
//	88 destroy receipt only after deletion        TestReceiptsOnlyAfterTheProviderConfirmed (all teardowns)
//	124 one client.get across execs               TestExecutesReuseTheCachedHandle, TestHandleCacheSingleFlightsConcurrentMisses
//	125 getDurationMs on a cache hit              TestExecutesReuseTheCachedHandle
//	126 lease A's handle never served to B        TestHandleCacheKeepsConcurrentLeasesApart
//	127 no sharing across companies/environments  TestHandleCacheIsNotSharedAcrossScopes
//	128 accounts and endpoints isolated           TestHandleCacheIsNotSharedAcrossScopes (second emulator, same key)
//	129 queued execute after release refused      TestExecuteAfterReleaseIsRefused, TestQueuedWorkIsRefusedOnceTheTeardownBegins
//	130 overlapping execute after release         TestCancelActiveWorkEndsInFlightExecutes, TestCancelActiveWorkStopsWithoutWaitingForInFlightWork
//	131 late execute after the tombstone          TestExecuteAfterReleaseIsRefused, TestLateWorkAfterTeardownIsRefused
//	132 cancel before draining a stalled execute  TestCancelActiveWorkStopsWithoutWaitingForInFlightWork, TestResumeRefusesWhileCancelledWorkIsSettling
//	133 rejected Stop: no termination report      TestCancelActiveWorkWithoutAReceiptWhenStopIsRejected
//	134 release/destroy when drain never settles  TestTeardownTerminatesWhenBridgeActivityNeverSettles
//	135 in-flight work before teardown cleanup    TestTeardownWaitsForAnInFlightActivityBeforeCleanup
//	136 overlapping teardowns                     TestOverlappingTeardownsKeepTheGateClosedUntilBothEnd
//	137 queued execute after destroy refused      TestLateWorkAfterTeardownIsRefused/environmentDestroyLease
//	143 failed populate not cached                TestHandleCacheDoesNotCacheAFailedPopulate
//	144 concurrent misses single-flighted         TestHandleCacheSingleFlightsConcurrentMisses
//	145 different-lease populates isolated        TestHandleCacheKeepsConcurrentLeasesApart
//	146 cached resume re-verifies, evicts         TestCachedResumeReverifiesTheSentinelAndEvictsOnMismatch
//	147 idle handle refreshed, stopped restarted  TestStaleRefreshRestartsAProviderStoppedSandbox
//	148 no refresh within the window              TestStaleHandleIsRefreshedAfterHalfTheAutoStopInterval
//	149 failed work does not advance freshness    TestFailedWorkDoesNotAdvanceFreshness (realize)
//	150 timed-out execute does not either         execute.go marks fresh only on a non-timed-out success (no test here)
//	151 no refresh with auto-stop disabled        TestNoStaleRefreshWhenAutoStopIsDisabled
//	152 failed refresh evicts                     TestFailedStaleRefreshEvictsAndFailsClosed
//	153 stalled refresh bounded                   TestStalledStaleRefreshIsBounded
//	154 realize after resume, provider target     TestRealizeAfterResumeWithAProviderFilledTarget
//	155 realize from the acquire-seeded handle    TestReusableLifecycleRoundTrips
//
// Seed-only rules (docs/behavior.md#seed-requirements) have their own tests: the warm floor (docs/behavior.md#warm-window,
// TestWarmFloor*), recover-then-stop and the typed stop error (docs/behavior.md#recover-then-stop,
// TestStopRecoversARecoverableErrorOnceThenStops, TestStopTypedErrors), the
// refused-resume retry (docs/behavior.md#refused-resume, TestResumeRetriesAStartRefusedWhileStopping,
// TestResumeGivesUpOnRepeatedRefusalsWithATransientError) and idle evidence
// (docs/behavior.md#idle-sleep, TestHealth*, TestOverlappingWorkKeepsAllocationEvidenceUntilAQuietReceipt).
// Races with Daytona's own transitions, which the reference's mocked SDK
// never meets, have tests of their own: TestDestroyWaitsOutATransitionInProgress,
// TestReusableReleaseDuringAnAutoStopKeepsTheSandbox,
// TestTeardownOfAnArchivedRetainedSandbox, TestResumeOfASandboxBeingDestroyedExpires,
// TestResumeExpiresWhenTheStartRunsIntoALostContainer; and in-process ones:
// TestAWaiterIsNotFailedByThePopulatingCallersCancellation,
// TestRealizeRestartingASandboxForgetsTheSessionAndRecachesIt.
// BenchmarkLifecycle and BENCH_NOTES.md count Daytona round trips per step.
package provider
