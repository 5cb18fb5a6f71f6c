/* The virtual-time tests (virtual_time.c), run by the runner in tests.c. */
#ifndef FIELDHUB_TEST_VIRTUAL_TIME_H
#define FIELDHUB_TEST_VIRTUAL_TIME_H

void test_virtual_time_runs_step_by_step_and_repeat_exactly(void);
void test_virtual_time_needs_a_hub_in_virtual_time_and_a_participant(void);
void test_virtual_time_a_participant_stepping_ahead_is_woken_only_by_what_its_filters_match(void);
void test_virtual_time_stepping_ahead_refuses_what_it_cannot_do(void);
void test_virtual_time_a_step_ahead_in_halves_is_awaited_in_slices_and_the_bus_goes_on(void);

#endif
