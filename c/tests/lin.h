/* The LIN node API tests (lin.c), run by the runner in tests.c. */
#ifndef FIELDHUB_TEST_LIN_H
#define FIELDHUB_TEST_LIN_H

void test_lin_standing_response_answers_the_schedule_until_replaced_and_withdrawn(void);

#endif
