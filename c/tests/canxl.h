/* The CAN XL frame API tests (canxl.c), run by the runner in tests.c. */
#ifndef FIELDHUB_TEST_CANXL_H
#define FIELDHUB_TEST_CANXL_H

void test_a_2048_byte_can_xl_frame_crosses_between_c_and_rust_clients(void);

#endif
