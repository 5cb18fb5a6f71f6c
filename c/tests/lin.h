/* The LIN node API tests (lin.c), run by the runner in tests.c. */
#ifndef FIELDHUB_TEST_LIN_H
#define FIELDHUB_TEST_LIN_H

void test_lin_standing_response_answers_the_schedule_until_replaced_and_withdrawn(void);
void test_lin_wake_up_wakes_the_sleeping_bus_and_the_schedule_resumes_after_the_wake_up_delay(void);

#endif
